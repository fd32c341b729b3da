// Command mkbundle builds a bundle archive from a source directory the way tenancy's renderer
// does: a POSIX tar (gzip-compressed when the output ends in .gz) of regular files and
// directories with clean relative names, and a bundle.json whose env_id is the one given and
// whose files[] lists every other file. A bundle.json in the source directory supplies the
// other keys (agent flags, compose_file, disk_need_bytes). It prints "<sha>  <archive name>",
// the line of testdata/bundles/SHAS, and upserts it there with -shas.
//
// It reads the source directory and writes the archive (and the SHAS file); nothing else. It
// refuses a symlink or any other non-regular file in the source.
//
//	go run ./test/mkbundle -o testdata/bundles/qa-basic.tar.gz -shas testdata/bundles/SHAS \
//	    testdata/bundles/src/qa-basic env-qa-02
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/internal/bundle"
)

func main() {
	out := flag.String("o", "", "the archive to write (.tar or .tar.gz)")
	shas := flag.String("shas", "", "a SHAS file to upsert the archive's line in")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: mkbundle -o <out.tar[.gz]> [-shas SHAS] <source dir> <env_id>")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	line, err := run(flag.Arg(0), flag.Arg(1), *out, *shas)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkbundle:", err)
		os.Exit(1)
	}
	fmt.Println(line)
}

func run(src, envID, out, shas string) (string, error) {
	files, dirs, err := collect(src)
	if err != nil {
		return "", err
	}
	meta := map[string]any{}
	if raw, ok := files[bundle.MetaFile]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return "", fmt.Errorf("source %s: %w", bundle.MetaFile, err)
		}
	}
	var listed []string
	for name := range files {
		if name != bundle.MetaFile {
			listed = append(listed, name)
		}
	}
	sort.Strings(listed)
	meta["env_id"] = envID
	meta["files"] = listed
	rawMeta, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return "", err
	}
	files[bundle.MetaFile] = append(rawMeta, '\n')

	archive, err := writeTar(files, dirs, strings.HasSuffix(out, ".gz"))
	if err != nil {
		return "", err
	}
	// What the agent would accept, with the sha it would compute.
	b, err := bundle.Read(archive, bundle.DefaultMaxBytes)
	if err != nil {
		return "", fmt.Errorf("the archive does not read back: %w", err)
	}
	if err := os.WriteFile(out, archive, 0o644); err != nil {
		return "", err
	}
	line := b.Sha + "  " + filepath.Base(out)
	if shas != "" {
		if err := upsert(shas, filepath.Base(out), line); err != nil {
			return "", err
		}
	}
	return line, nil
}

func collect(src string) (map[string][]byte, []string, error) {
	files := map[string][]byte{}
	var dirs []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".":
			return nil
		case d.IsDir():
			dirs = append(dirs, rel)
			return nil
		case d.Type().IsRegular():
			body, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[rel] = body
			return nil
		}
		return fmt.Errorf("%s is not a regular file or a directory", p)
	})
	sort.Strings(dirs)
	return files, dirs, err
}

// writeTar writes a reproducible archive: fixed times and owners, directories first.
func writeTar(files map[string][]byte, dirs []string, gz bool) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n])), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if !gz {
		return buf.Bytes(), nil
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.ModTime = mtime
	if _, err := zw.Write(buf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

func upsert(shas, name, line string) error {
	raw, err := os.ReadFile(shas)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if l == "" || strings.HasSuffix(l, "  "+name) {
			continue
		}
		lines = append(lines, l)
	}
	lines = append(lines, line)
	sort.Slice(lines, func(i, j int) bool { return field2(lines[i]) < field2(lines[j]) })
	return os.WriteFile(shas, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func field2(l string) string {
	if i := strings.Index(l, "  "); i >= 0 {
		return l[i+2:]
	}
	return l
}
