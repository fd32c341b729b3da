package testkit

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// TarEntry is one entry of an archive a test writes verbatim, however odd: its header and,
// for a regular file, its content.
type TarEntry struct {
	Header tar.Header
	Body   []byte
}

// TarFile is a regular file entry, mode 0644.
func TarFile(name, body string) TarEntry {
	return TarEntry{Header: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}, Body: []byte(body)}
}

// TarDir is a directory entry, mode 0755.
func TarDir(name string) TarEntry {
	return TarEntry{Header: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
}

// Tar writes the entries, in order, as a tar archive.
func Tar(tb testing.TB, entries ...TarEntry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.Header
		if err := tw.WriteHeader(&h); err != nil {
			tb.Fatalf("write header %q: %v", h.Name, err)
		}
		if len(e.Body) > 0 {
			if _, err := tw.Write(e.Body); err != nil {
				tb.Fatalf("write %q: %v", h.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Gzip compresses b.
func Gzip(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// BundleMeta renders a release's bundle.json as tenancy's renderer writes it: its env_id, the
// names of the other files (sorted), and the extra keys given (agent flags, compose_file,
// disk_need_bytes).
func BundleMeta(envID string, extra map[string]any, files ...string) string {
	names := append([]string(nil), files...)
	sort.Strings(names)
	m := map[string]any{"env_id": envID, "files": names}
	for k, v := range extra {
		m[k] = v
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// Bundle is the files of a release with the bundle.json BundleMeta renders for them, ready to
// be put in an archive by TarFiles.
func Bundle(envID string, files map[string]string) map[string]string {
	out := map[string]string{}
	names := make([]string, 0, len(files))
	for n, b := range files {
		out[n] = b
		names = append(names, n)
	}
	out["bundle.json"] = BundleMeta(envID, nil, names...)
	return out
}

// TarFiles are the regular file entries of files, sorted by name.
func TarFiles(files map[string]string) []TarEntry {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]TarEntry, 0, len(names))
	for _, n := range names {
		out = append(out, TarFile(n, files[n]))
	}
	return out
}

// Sections splits a case of testdata/compose (and any text of `-- name --` headers) into its
// sections by name, each the lines after its header; text before the first header is dropped.
func Sections(raw string) map[string]string {
	out := map[string]string{}
	cur := ""
	for _, line := range strings.SplitAfter(raw, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") {
			cur = strings.TrimSuffix(strings.TrimPrefix(l, "-- "), " --")
			out[cur] = ""
			continue
		}
		if cur != "" {
			out[cur] += line
		}
	}
	return out
}

// CaseRelease is the release a corpus case's sections describe (Sections): every section but
// `want` and `agent-env`, with a bundle.json listing them (BundleMeta, for envID) unless the case
// writes its own.
func CaseRelease(secs map[string]string, envID string) map[string]string {
	out := map[string]string{}
	var names []string
	for n, body := range secs {
		if n == "want" || n == "agent-env" {
			continue
		}
		out[n] = body
		if n != "bundle.json" {
			names = append(names, n)
		}
	}
	if _, ok := out["bundle.json"]; !ok {
		out["bundle.json"] = BundleMeta(envID, nil, names...)
	}
	return out
}
