package bundle

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// largeBundle is a benign bundle of about 30 MiB: twelve 1 MiB assets, then one of 18 MiB, and
// only then bundle.json, the compose file, the template and the manifest — so that the held
// budget is spent before the files the agent reads whole arrive.
func largeBundle(t *testing.T) (archive []byte, want map[string][]byte) {
	want = map[string][]byte{}
	var es []testkit.TarEntry
	add := func(name string, body []byte) {
		want[name] = body
		e := testkit.TarFile(name, "")
		e.Header.Size, e.Body = int64(len(body)), body
		es = append(es, e)
	}
	for i := 0; i < 12; i++ {
		add(fmt.Sprintf("assets/style-%02d.css", i), bytes.Repeat([]byte(fmt.Sprintf("p%d { color: red; }\n", i)), (1<<20)/20))
	}
	add("assets/video.bin", bytes.Repeat([]byte("\x00\x01binary"), 18<<20/8))
	add(TemplateFile, []byte("A=${A}\n"))
	add(ManifestFile, []byte(`{"entries":[{"path":"env-qa-02/app","key":"a","env":"A"}]}`))
	add("compose.yaml", []byte(okCompose))
	names := []string{}
	for n := range want {
		names = append(names, n)
	}
	meta := testkit.BundleMeta("env-qa-02", nil, names...)
	es = append([]testkit.TarEntry{testkit.TarDir("assets/")}, es...)
	// bundle.json comes after everything but the compose file
	es = append(es[:len(es)-1], testkit.TarFile(MetaFile, meta), es[len(es)-1])
	want[MetaFile] = []byte(meta)
	return testkit.Tar(t, es...), want
}

// readFile is ReadFrom of an archive written to a file, as the tick reads a fetched bundle.
func readFile(t *testing.T, archive []byte) (*Bundle, *os.File) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bundle")
	if err := os.WriteFile(p, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	b, err := ReadFrom(f, int64(len(archive)), DefaultMaxBytes)
	if err != nil {
		t.Fatalf("ReadFrom: %v", err)
	}
	return b, f
}

// TestALargeBundleIsHeldWithinItsBudget (issue 47): a benign bundle whose assets fill it is read
// holding at most the held budget in memory (allocations counted), its sha is the sha of every
// file, the files the agent reads whole are held even though they came last, and Each hands out
// every file byte for byte — plain and gzip.
func TestALargeBundleIsHeldWithinItsBudget(t *testing.T) {
	raw, want := largeBundle(t)
	for name, archive := range map[string][]byte{"plain": raw, "gzip": testkit.Gzip(t, raw)} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b, _ := readFile(t, archive)
			runtime.ReadMemStats(&after)
			if got := after.TotalAlloc - before.TotalAlloc; got > heldBudget+4<<20 {
				t.Errorf("reading a %d MiB bundle allocated %d MiB, want at most the held budget (%d MiB) and 4 MiB", len(raw)>>20, got>>20, heldBudget>>20)
			}
			if b.Held() > heldBudget+64<<10 {
				t.Errorf("held %d bytes, want at most %d", b.Held(), heldBudget+64<<10)
			}
			if b.Sha != Sha(want) {
				t.Errorf("sha %s, want %s", b.Sha, Sha(want))
			}
			for _, n := range []string{MetaFile, TemplateFile, ManifestFile, "compose.yaml"} {
				if !bytes.Equal(b.Files[n], want[n]) {
					t.Errorf("%s is not held: %q", n, b.Files[n])
				}
			}
			if _, held := b.Files["assets/video.bin"]; held || !b.Has("assets/video.bin") || b.Size("assets/video.bin") != int64(len(want["assets/video.bin"])) {
				t.Errorf("the 18 MiB asset: held %v, has %v, size %d", held, b.Has("assets/video.bin"), b.Size("assets/video.bin"))
			}
			if b.Count() != len(want) || len(b.Names()) != len(want) {
				t.Errorf("count %d, names %d, want %d", b.Count(), len(b.Names()), len(want))
			}
			got := map[string][32]byte{}
			err := b.Each(func(n string, size int64, r io.Reader) error {
				data, err := io.ReadAll(r)
				if int64(len(data)) != size {
					t.Errorf("%s: %d bytes, size says %d", n, len(data), size)
				}
				got[n] = sha256.Sum256(data)
				return err
			})
			if err != nil {
				t.Fatalf("Each: %v", err)
			}
			for n, data := range want {
				if got[n] != sha256.Sum256(data) {
					t.Errorf("Each handed %s other bytes (or none)", n)
				}
			}
		})
	}
}

// TestAnArchiveChangedUnderTheBundleIsAnError: a file left in the archive that changes after
// the read is never handed out as the verified bytes: Each fails once it has read them.
func TestAnArchiveChangedUnderTheBundleIsAnError(t *testing.T) {
	raw, want := largeBundle(t)
	b, f := readFile(t, raw)
	at := bytes.Index(raw, want["assets/video.bin"][:64])
	if at < 0 {
		t.Fatal("the asset is not in the archive")
	}
	w, err := os.OpenFile(f.Name(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("X"), int64(at+1000)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	err = b.Each(func(string, int64, io.Reader) error { return nil })
	if !errors.Is(err, errArchiveChanged) {
		t.Fatalf("Each after the archive changed: %v, want %v", err, errArchiveChanged)
	}
}

// TestAMetaFileOverItsBoundIsRefused: a file the agent reads whole is held up to heldFileMax;
// a template larger than that is refused by its size, never read into memory.
func TestAMetaFileOverItsBoundIsRefused(t *testing.T) {
	big := bytes.Repeat([]byte("# a comment line of a template\n"), heldFileMax/31+1)
	e := testkit.TarFile(TemplateFile, "")
	e.Header.Size, e.Body = int64(len(big)), big
	archive := testkit.Tar(t, validEntries("env-qa-02", e)...)
	_, err := Read(archive, DefaultMaxBytes)
	r := wantRefusal(t, err, "BUNDLE_INVALID")
	if want := fmt.Sprintf("%s is %d bytes", TemplateFile, len(big)); !bytes.Contains([]byte(r.Detail), []byte(want)) {
		t.Errorf("detail %q does not say %q", r.Detail, want)
	}
}
