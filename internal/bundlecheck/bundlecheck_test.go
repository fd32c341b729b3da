package bundlecheck

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
)

const env = "env-qa-02"

// writeTree writes files (slash paths) under a new directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	for n, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCorpusAsUnpackedDirectories runs every case of the hostile-compose corpus
// (testdata/compose, the cases the tick's checks are held to) through Pack and Run from an
// unpacked directory: the verdict is the case's code, and a PRIVILEGED_REFUSED case gives
// exactly its findings, one per line, in order.
func TestCorpusAsUnpackedDirectories(t *testing.T) {
	t.Setenv("HOME", "/home/monky-deployd")
	paths, err := filepath.Glob("../../testdata/compose/*.txt")
	if err != nil || len(paths) < 30 {
		t.Fatalf("corpus: %d cases, %v", len(paths), err)
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txt"), func(t *testing.T) {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			secs := testkit.Sections(string(raw))
			want := strings.Split(strings.TrimSpace(secs["want"]), "\n")
			code, lines := strings.TrimSpace(want[0]), want[1:]
			if secs["agent-env"] != "" {
				// the tick, and so check, hand compose none of the agent's environment (it
				// runs the resolved model alone): a case decided by it is bundle's alone
				t.Skip("decided by the agent's environment, which no compose call sees")
			}
			secs = testkit.CaseRelease(secs, env)
			archive, err := Pack(writeTree(t, secs))
			if err != nil {
				t.Fatal(err)
			}
			res := Run(archive, Options{EnvID: env})
			var got []string
			for _, f := range res.Findings {
				if string(f.Code) != code {
					t.Fatalf("finding %v, want code %s", f, code)
				}
				got = append(got, strings.TrimSuffix(f.Detail, privilegedHint))
			}
			switch code {
			case "none":
				if len(got) > 0 {
					t.Fatalf("refused: %v", res.Findings)
				}
			case string(vocab.PrivilegedRefused):
				if strings.Join(got, "\n") != strings.Join(lines, "\n") {
					t.Fatalf("lines:\n  %s\nwant one per finding:\n  %s", strings.Join(got, "\n  "), strings.Join(lines, "\n  "))
				}
			default:
				if len(got) != 1 {
					t.Fatalf("findings %v, want one %s", res.Findings, code)
				}
				for _, w := range lines {
					if !strings.Contains(got[0], w) {
						t.Fatalf("detail %q lacks %q", got[0], w)
					}
				}
			}
		})
	}
}

// TestRunOrderEnvRollbackAndArchives: the same files as a directory, a tar and a tar.gz give
// one sha; --env and the rollback rule are the box's; a symlink in a directory is refused as
// the tick refuses it in an archive; Run leaves nothing in the temporary directory.
func TestRunOrderEnvRollbackAndArchives(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	files := testkit.Bundle(env, map[string]string{"compose.yaml": "services:\n  api:\n    image: x\n"})
	dir := writeTree(t, files)
	packed, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	plain := testkit.Tar(t, testkit.TarFiles(files)...)
	var shas []string
	for _, a := range [][]byte{packed, plain, testkit.Gzip(t, plain)} {
		res := Run(a, Options{})
		if len(res.Findings) != 0 || res.EnvID != env {
			t.Fatalf("a plain bundle: %+v", res)
		}
		shas = append(shas, res.Sha)
	}
	if shas[0] != shas[1] || shas[1] != shas[2] {
		t.Errorf("shas differ between directory, tar and tar.gz: %v", shas)
	}

	if res := Run(plain, Options{EnvID: "env-qa-03"}); len(res.Findings) != 1 || res.Findings[0].Code != vocab.BundleEnvMismatch {
		t.Errorf("--env env-qa-03: %+v, want BUNDLE_ENV_MISMATCH", res.Findings)
	}
	if res := Run(plain, Options{Rollback: true}); len(res.Findings) != 1 || res.Findings[0].Code != vocab.RollbackRefused {
		t.Errorf("as a rollback: %+v, want ROLLBACK_REFUSED", res.Findings)
	}
	allowed := testkit.Bundle(env, map[string]string{"compose.yaml": "services:\n  api:\n    image: x\n"})
	allowed["bundle.json"] = testkit.BundleMeta(env, map[string]any{"agent": map[string]bool{"allow_rollback": true}}, "compose.yaml")
	if res := Run(testkit.Tar(t, testkit.TarFiles(allowed)...), Options{Rollback: true}); len(res.Findings) != 0 {
		t.Errorf("a rollback the bundle allows: %+v", res.Findings)
	}
	// ROLLBACK_REFUSED comes after the checks model.Check makes, as in the tick
	if res := Run(plain, Options{EnvID: "env-qa-03", Rollback: true}); len(res.Findings) != 1 || res.Findings[0].Code != vocab.BundleEnvMismatch {
		t.Errorf("env mismatch and rollback: %+v, want the earlier BUNDLE_ENV_MISMATCH only", res.Findings)
	}

	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	packed, err = Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res := Run(packed, Options{}); len(res.Findings) != 1 || res.Findings[0].Code != vocab.BundleInvalid || !strings.Contains(res.Findings[0].Detail, "symlink") {
		t.Errorf("a symlink in the directory: %+v, want BUNDLE_INVALID naming the symlink", res.Findings)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("Run left %d entries in the temporary directory", len(left))
	}
}

func TestOpenArchiveBound(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.tar")
	if err := os.WriteFile(p, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, f, err := OpenArchive(p, 1<<20); err != nil || f == nil || f.Code != vocab.BundleInvalid {
		t.Errorf("a 3 MiB file with max 1 MiB: finding %v, err %v; want BUNDLE_INVALID", f, err)
	}
	file, size, f, err := OpenArchive(p, 0)
	if err != nil || f != nil || size != 3<<20 {
		t.Errorf("within the default bound: %d bytes, %v, %v", size, f, err)
	}
	if file != nil {
		file.Close()
	}
	fifo := filepath.Join(t.TempDir(), "fifo.tar")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := OpenArchive(fifo, 0); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO: %v, want not a regular file (and no wait for a writer)", err)
	}
}
