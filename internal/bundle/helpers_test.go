package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"sort"
	"testing"
)

// entry is one tar entry a test writes verbatim.
type entry struct {
	hdr  tar.Header
	body []byte
}

func file(name, body string) entry {
	return entry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}, body: []byte(body)}
}

func dir(name string) entry {
	return entry{hdr: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
}

func mkTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("write header %q: %v", h.Name, err)
		}
		if len(e.body) > 0 {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatalf("write %q: %v", h.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const okCompose = "services:\n  api:\n    image: harbor.tikali.net/monky/api:1\n"

// bundleMeta renders a bundle.json listing files (bundle.json itself excluded).
func bundleMeta(env string, extra map[string]any, files ...string) string {
	m := map[string]any{"env_id": env, "files": files}
	for k, v := range extra {
		m[k] = v
	}
	sort.Strings(files)
	out, _ := json.Marshal(m)
	return string(out)
}

// validEntries is a minimal valid bundle for env, with the given extra files.
func validEntries(env string, extra ...entry) []entry {
	names := []string{"compose.yaml"}
	for _, e := range extra {
		if e.hdr.Typeflag == tar.TypeReg {
			names = append(names, e.hdr.Name)
		}
	}
	es := []entry{file("bundle.json", bundleMeta(env, nil, names...)), file("compose.yaml", okCompose)}
	return append(es, extra...)
}

func wantRefusal(t *testing.T, err error, code string) *Refusal {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	r, ok := err.(*Refusal)
	if !ok {
		t.Fatalf("got %T %v, want *Refusal %s", err, err, code)
	}
	if r.Code != code {
		t.Fatalf("got %v, want code %s", r, code)
	}
	return r
}
