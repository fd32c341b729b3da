package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
)

func TestReadValidPlainAndGzip(t *testing.T) {
	raw := testkit.Tar(t, validEntries("env-qa-02", testkit.TarDir("config/"), testkit.TarFile("config/app.toml", "port = 8080\n"))...)
	for name, archive := range map[string][]byte{"plain": raw, "gzip": testkit.Gzip(t, raw)} {
		t.Run(name, func(t *testing.T) {
			b, err := Read(archive, 1<<20)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if got := string(b.Files["config/app.toml"]); got != "port = 8080\n" {
				t.Errorf("config/app.toml = %q", got)
			}
			if len(b.Files) != 3 {
				t.Errorf("files = %d, want 3 (bundle.json included)", len(b.Files))
			}
			if len(b.Dirs) != 1 || b.Dirs[0] != "config" {
				t.Errorf("dirs = %v, want [config]", b.Dirs)
			}
			if b.Meta.EnvID != "env-qa-02" || b.Meta.ComposeFile != "compose.yaml" {
				t.Errorf("meta = %+v", b.Meta)
			}
			if b.Sha != Sha(b.Files) || len(b.Sha) != 64 {
				t.Errorf("sha = %q", b.Sha)
			}
		})
	}
}

func TestReadSameShaPlainAndGzip(t *testing.T) {
	raw := testkit.Tar(t, validEntries("env-qa-02")...)
	a, err := Read(raw, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Read(testkit.Gzip(t, raw), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if a.Sha != b.Sha {
		t.Errorf("plain sha %s ≠ gzip sha %s", a.Sha, b.Sha)
	}
}

func TestReadHostile(t *testing.T) {
	reg := func(name string) testkit.TarEntry { return testkit.TarFile(name, "x") }
	withType := func(name string, typ byte) testkit.TarEntry {
		return testkit.TarEntry{Header: tar.Header{Name: name, Typeflag: typ, Mode: 0o644, Linkname: "compose.yaml", Devmajor: 1, Devminor: 3}}
	}
	setuid := testkit.TarFile("tool", "#!/bin/sh\n")
	setuid.Header.Mode = 0o4755
	setgid := testkit.TarFile("tool", "x")
	setgid.Header.Mode = 0o2755
	sticky := testkit.TarDir("tmp/")
	sticky.Header.Mode = 0o1777
	longPax := testkit.TarFile(strings.Repeat("d/", 60)+"../x", "x") // > 100 bytes: a PAX path record
	longPax.Header.Format = tar.FormatPAX

	cases := map[string][]testkit.TarEntry{
		"dotdot":             validEntries("env-qa-02", reg("../x")),
		"absolute":           validEntries("env-qa-02", reg("/abs")),
		"inner dotdot":       validEntries("env-qa-02", reg("a/../../x")),
		"inner dotdot clean": validEntries("env-qa-02", reg("a/../x")),
		"dot slash":          validEntries("env-qa-02", reg("./x")),
		"double slash":       validEntries("env-qa-02", reg("a//x")),
		"dot dir":            validEntries("env-qa-02", testkit.TarDir("./")),
		"symlink":            validEntries("env-qa-02", withType("link", tar.TypeSymlink)),
		"hardlink":           validEntries("env-qa-02", withType("hard", tar.TypeLink)),
		"char device":        validEntries("env-qa-02", withType("null", tar.TypeChar)),
		"block device":       validEntries("env-qa-02", withType("sda", tar.TypeBlock)),
		"fifo":               validEntries("env-qa-02", withType("pipe", tar.TypeFifo)),
		"gnu sparse type":    validEntries("env-qa-02", withType("sparse", tar.TypeGNUSparse)),
		"contiguous type":    validEntries("env-qa-02", withType("cont", tar.TypeCont)),
		"unknown type":       validEntries("env-qa-02", withType("odd", 'Z')),
		"setuid":             validEntries("env-qa-02", setuid),
		"setgid":             validEntries("env-qa-02", setgid),
		"sticky dir":         validEntries("env-qa-02", sticky),
		"duplicate":          append(validEntries("env-qa-02"), testkit.TarFile("compose.yaml", okCompose)),
		"file then symlink":  append(validEntries("env-qa-02"), withType("compose.yaml", tar.TypeSymlink)),
		"file then dir":      append(validEntries("env-qa-02"), testkit.TarDir("compose.yaml/")),
		"file as parent":     validEntries("env-qa-02", reg("compose.yaml/inner")),
		"pax long dotdot":    validEntries("env-qa-02", longPax),
		"no bundle.json":     {testkit.TarFile("compose.yaml", okCompose)},
	}
	for name, es := range cases {
		t.Run(name, func(t *testing.T) {
			raw := testkit.Tar(t, es...)
			_, err := Read(raw, 1<<20)
			r := wantRefusal(t, err, vocab.BundleInvalid)
			if strings.Contains(r.Detail, "\n") {
				t.Errorf("detail has a newline: %q", r.Detail)
			}
			_, err = Read(testkit.Gzip(t, raw), 1<<20)
			wantRefusal(t, err, vocab.BundleInvalid)
		})
	}
}

func TestReadPAXGlobalHeaderAccepted(t *testing.T) {
	g := testkit.TarEntry{Header: tar.Header{Name: "pax_global_header", Typeflag: tar.TypeXGlobalHeader,
		PAXRecords: map[string]string{"comment": "0123456789abcdef0123456789abcdef01234567"}}}
	b, err := Read(testkit.Tar(t, append([]testkit.TarEntry{g}, validEntries("env-qa-02")...)...), 1<<20)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if _, ok := b.Files["pax_global_header"]; ok || len(b.Files) != 2 {
		t.Errorf("files = %d: the global header is metadata, not a file", len(b.Files))
	}
}

func TestReadPAXLongPathAccepted(t *testing.T) {
	long := strings.Repeat("deep/", 40) + "file.txt"
	e := testkit.TarFile(long, "ok")
	e.Header.Format = tar.FormatPAX
	b, err := Read(testkit.Tar(t, validEntries("env-qa-02", e)...), 1<<20)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if string(b.Files[long]) != "ok" {
		t.Errorf("long path not read")
	}
}

func TestReadEntryCount(t *testing.T) {
	build := func(n int) []byte {
		extra := make([]testkit.TarEntry, 0, n)
		for i := 0; len(extra)+2 < n; i++ {
			extra = append(extra, testkit.TarDir(fmt.Sprintf("d%05d/", i)))
		}
		return testkit.Tar(t, validEntries("env-qa-02", extra...)...)
	}
	if _, err := Read(build(MaxEntries), 1<<20); err != nil {
		t.Fatalf("%d entries refused: %v", MaxEntries, err)
	}
	_, err := Read(build(MaxEntries+1), 1<<20)
	r := wantRefusal(t, err, vocab.BundleInvalid)
	if !strings.Contains(r.Detail, "10000 entries") {
		t.Errorf("detail = %q", r.Detail)
	}
}

func TestReadSizeCap(t *testing.T) {
	big := testkit.TarFile("big.bin", strings.Repeat("a", 2000))
	raw := testkit.Tar(t, validEntries("env-qa-02", big)...)
	if _, err := Read(raw, 4096); err != nil {
		t.Fatalf("under the cap: %v", err)
	}
	_, err := Read(raw, 1500)
	r := wantRefusal(t, err, vocab.BundleInvalid)
	if !strings.Contains(r.Detail, "1500 bytes") {
		t.Errorf("detail = %q", r.Detail)
	}
}

// A header that lies about a huge size is refused from the header, with nothing allocated.
func TestReadHeaderSizeLie(t *testing.T) {
	raw := testkit.Tar(t, validEntries("env-qa-02", testkit.TarFile("small", "abc"))...)
	// Rewrite the size field of the "small" header to 8 GiB (octal) and fix the checksum.
	idx := bytes.Index(raw, []byte("small\x00"))
	if idx < 0 || idx%512 != 0 {
		t.Fatalf("header not found")
	}
	h := raw[idx : idx+512]
	copy(h[124:136], fmt.Sprintf("%011o\x00", int64(8<<30)))
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	_, err := Read(raw, 1<<20)
	wantRefusal(t, err, vocab.BundleInvalid)
}

func TestReadGzipBomb(t *testing.T) {
	// 64 MiB of one file behind a few tens of KiB of gzip: refused at the 1 MiB cap.
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	body := []byte(okCompose)
	meta := testkit.BundleMeta("env-qa-02", nil, "compose.yaml", "bomb")
	for _, f := range []struct {
		name string
		size int64
	}{{"bundle.json", int64(len(meta))}, {"compose.yaml", int64(len(body))}, {"bomb", 64 << 20}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: f.size}); err != nil {
			t.Fatal(err)
		}
		switch f.name {
		case "bundle.json":
			tw.Write([]byte(meta))
		case "compose.yaml":
			tw.Write(body)
		default:
			zero := make([]byte, 1<<20)
			for i := 0; i < 64; i++ {
				tw.Write(zero)
			}
		}
	}
	tw.Close()
	zw.Close()
	if buf.Len() > 1<<20 {
		t.Fatalf("bomb is %d bytes compressed", buf.Len())
	}
	_, err := Read(buf.Bytes(), 1<<20)
	wantRefusal(t, err, vocab.BundleInvalid)
}

// A stream of empty-named zero blocks without an end is caught by the stream cap too.
func TestReadTruncated(t *testing.T) {
	raw := testkit.Tar(t, validEntries("env-qa-02", testkit.TarFile("data", strings.Repeat("z", 3000)))...)
	for _, cut := range []int{100, 700, 1500, len(raw) / 2} {
		_, err := Read(raw[:cut], 1<<20)
		wantRefusal(t, err, vocab.BundleInvalid)
	}
	z := testkit.Gzip(t, raw)
	_, err := Read(z[:len(z)-6], 1<<20)
	wantRefusal(t, err, vocab.BundleInvalid)
	// A corrupt gzip checksum.
	bad := append([]byte(nil), z...)
	bad[len(bad)-8] ^= 0xff
	_, err = Read(bad, 1<<20)
	wantRefusal(t, err, vocab.BundleInvalid)
}

func TestReadFilesListBothWays(t *testing.T) {
	t.Run("listed but absent", func(t *testing.T) {
		raw := testkit.Tar(t, testkit.TarFile("bundle.json", testkit.BundleMeta("env-qa-02", nil, "compose.yaml", "config/gone.toml")), testkit.TarFile("compose.yaml", okCompose))
		_, err := Read(raw, 1<<20)
		r := wantRefusal(t, err, vocab.BundleInvalid)
		if !strings.Contains(r.Detail, "config/gone.toml") {
			t.Errorf("detail = %q, want the missing path", r.Detail)
		}
	})
	t.Run("present but unlisted", func(t *testing.T) {
		raw := testkit.Tar(t, testkit.TarFile("bundle.json", testkit.BundleMeta("env-qa-02", nil, "compose.yaml")), testkit.TarFile("compose.yaml", okCompose), testkit.TarFile("extra.txt", "x"))
		_, err := Read(raw, 1<<20)
		r := wantRefusal(t, err, vocab.BundleInvalid)
		if !strings.Contains(r.Detail, "extra.txt") {
			t.Errorf("detail = %q, want the unlisted path", r.Detail)
		}
	})
	t.Run("compose file missing", func(t *testing.T) {
		raw := testkit.Tar(t, testkit.TarFile("bundle.json", testkit.BundleMeta("env-qa-02", map[string]any{"compose_file": "docker-compose.yml"}, "compose.yaml")), testkit.TarFile("compose.yaml", okCompose))
		_, err := Read(raw, 1<<20)
		r := wantRefusal(t, err, vocab.BundleInvalid)
		if !strings.Contains(r.Detail, "docker-compose.yml") {
			t.Errorf("detail = %q", r.Detail)
		}
	})
	t.Run("bad json", func(t *testing.T) {
		_, err := Read(testkit.Tar(t, testkit.TarFile("bundle.json", "{"), testkit.TarFile("compose.yaml", okCompose)), 1<<20)
		wantRefusal(t, err, vocab.BundleInvalid)
	})
}

func TestReadMetaDefaultsAndUnknownKeys(t *testing.T) {
	meta := `{"env_id":"env-qa-02","disk_need_bytes":2147483648,"agent":{"allow_rollback":true},` +
		`"address":{},"pull":{},"renderer":{"v":1},"images_policy":"","secrets_provider":"openbao","files":["compose.yaml"]}`
	b, err := Read(testkit.Tar(t, testkit.TarFile("bundle.json", meta), testkit.TarFile("compose.yaml", okCompose)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if b.Meta.ComposeFile != "compose.yaml" || b.Meta.DiskNeedBytes != 2147483648 || !b.Meta.Agent.AllowRollback || b.Meta.Agent.AllowPrivileged {
		t.Errorf("meta = %+v", b.Meta)
	}
}

func BenchmarkRead(b *testing.B) {
	es := make([]testkit.TarEntry, 0, 100)
	names := []string{"compose.yaml"}
	chunk := bytes.Repeat([]byte("0123456789abcdef"), (8<<20)/100/16)
	for i := 0; i < 98; i++ {
		name := fmt.Sprintf("assets/f%03d.bin", i)
		names = append(names, name)
		es = append(es, testkit.TarEntry{Header: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(chunk))}, Body: chunk})
	}
	all := append([]testkit.TarEntry{testkit.TarFile("bundle.json", testkit.BundleMeta("env-qa-02", nil, names...)), testkit.TarFile("compose.yaml", okCompose)}, es...)
	raw := testkit.Tar(b, all...)
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Read(raw, 64<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// A directory named .env — an entry of its own, or the parent of a listed file — stands where
// the agent writes .env: refused from the archive (d0f940a read it, and the apply failed at
// staging, after the lease).
func TestReadDotEnvDirectory(t *testing.T) {
	for name, es := range map[string][]testkit.TarEntry{
		"directory entry":  validEntries("env-qa-02", testkit.TarDir(".env/")),
		"parent of a file": validEntries("env-qa-02", testkit.TarFile(".env/x", "X=1\n")),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Read(testkit.Tar(t, es...), 0)
			r := wantRefusal(t, err, vocab.BundleInvalid)
			if !strings.Contains(r.Detail, "a directory .env") {
				t.Errorf("detail %q", r.Detail)
			}
		})
	}
}
