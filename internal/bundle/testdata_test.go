package bundle

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The bundles in testdata/bundles carry their shas in SHAS. Each is read, unpacked to a temp
// dir and its sha recomputed with the support engineer's pipeline of PROTOCOL.md §2.
func TestTestdataBundles(t *testing.T) {
	for _, tool := range []string{"sh", "find", "sort", "xargs", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed on PATH for this test: %v", tool, err)
		}
	}
	dir := filepath.Join("..", "..", "testdata", "bundles")
	f, err := os.Open(filepath.Join(dir, "SHAS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		want, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHAS line %q", sc.Text())
		}
		n++
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			b, err := Read(raw, DefaultMaxBytes)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if b.Sha != want {
				t.Errorf("bundle.Sha = %s, SHAS says %s", b.Sha, want)
			}
			root := t.TempDir()
			for _, d := range b.Dirs {
				if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			for p, body := range b.Files {
				full := filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, body, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// A rendered .env sits next to the files in a release: the pipeline leaves it out.
			if err := os.WriteFile(filepath.Join(root, ".env"), []byte("X=1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", `find . -type f ! -name .env -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum`)
			cmd.Dir = root
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("pipeline: %v", err)
			}
			if got := strings.Fields(string(out))[0]; got != want {
				t.Errorf("shell pipeline = %s, SHAS says %s", got, want)
			}
		})
	}
	if n != 3 {
		t.Errorf("SHAS lists %d bundles, want 3", n)
	}
}
