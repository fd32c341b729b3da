package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// TestHostileCompose runs the hostile-compose corpus in testdata/compose/: every case is a
// bundle written as sections (`-- name --`), read from its archive and checked as the agent
// checks a bundle before any lease. The section `want` holds the code on its first line
// (`none`, PRIVILEGED_REFUSED or BUNDLE_INVALID) and then, for PRIVILEGED_REFUSED, exactly the
// findings in order, for BUNDLE_INVALID words the detail must hold. The optional section
// `agent-env` lists the names in the agent's environment; `bundle.json` is written when the
// case has none.
func TestHostileCompose(t *testing.T) {
	t.Setenv("HOME", "/home/monky-deployd") // compose-go expands ~ with it
	paths, err := filepath.Glob("../../testdata/compose/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 30 {
		t.Fatalf("the corpus has %d cases, want at least 30", len(paths))
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".txt")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			secs := sections(t, string(raw))
			want := strings.Split(strings.TrimSpace(secs["want"]), "\n")
			code, lines := strings.TrimSpace(want[0]), want[1:]
			var agentEnv []string
			if e, ok := secs["agent-env"]; ok {
				agentEnv = strings.Fields(e)
			}
			secs = testkit.CaseRelease(secs, env)
			var entries []testkit.TarEntry
			for n, body := range secs {
				entries = append(entries, testkit.TarFile(n, body))
			}
			b, err := bundle.Read(testkit.Tar(t, entries...), 0)
			var r *bundle.Refusal
			if err != nil {
				r = err.(*bundle.Refusal)
			} else {
				r = Check(b, CheckInput{DesiredSha: b.Sha, EnvID: env, Compose: ComposeEnv{AgentEnv: agentEnv}})
			}
			switch code {
			case "none":
				if r != nil {
					t.Fatalf("refused: %v", r)
				}
			case string(vocab.PrivilegedRefused):
				if r == nil || r.Code != vocab.PrivilegedRefused {
					t.Fatalf("got %v, want %s", r, vocab.PrivilegedRefused)
				}
				got, _ := PrivilegedFindings(b, ComposeEnv{AgentEnv: agentEnv})
				if strings.Join(got, "\n") != strings.Join(lines, "\n") {
					t.Fatalf("findings:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(lines, "\n  "))
				}
			case string(vocab.BundleInvalid):
				if r == nil || r.Code != vocab.BundleInvalid {
					t.Fatalf("got %v, want %s", r, vocab.BundleInvalid)
				}
				for _, w := range lines {
					if !strings.Contains(r.Detail, w) {
						t.Fatalf("detail %q lacks %q", r.Detail, w)
					}
				}
			default:
				t.Fatalf("want section: unknown code %q", code)
			}
		})
	}
}

// sections splits a case into its `-- name --` sections; it must have a want section.
func sections(t *testing.T, raw string) map[string]string {
	out := testkit.Sections(raw)
	if _, ok := out["want"]; !ok {
		t.Fatal("no want section")
	}
	return out
}
