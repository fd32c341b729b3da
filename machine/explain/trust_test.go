package explain_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// TestALocalFailuresFixMendsTheFile: a tick that ended LOCAL_FAILURE at the trust check of one
// of the agent's files names that file in its fault and mends it in its fix line, which is the
// agent's own fix (files.TrustFix of the entry's reason and subject), then the tick again. Run as
// printed on a scratch state_dir (less the sudo: the test may do it), the line leaves the file
// trusted or gone. A record that names no file (an older agent's) keeps the registry's line,
// which sends no one to the evidence.
func TestALocalFailuresFixMendsTheFile(t *testing.T) {
	uid, name, own := testkit.AgentUser(t, &files.AgentUID)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		reason vocab.Reason
		plant  func(tok string)
		fault  string
	}{
		{vocab.ReasonTrustLink, func(tok string) { must(t, os.Symlink("/etc/hostname", tok)) }, "is a symlink"},
		{vocab.ReasonTrustType, func(tok string) { must(t, syscall.Mkfifo(tok, 0o600)) }, "is not the kind of file"},
		{vocab.ReasonTrustTree, func(tok string) {
			must(t, os.Mkdir(tok, 0o700))
			must(t, os.WriteFile(filepath.Join(tok, "x"), nil, 0o600))
		}, "is a directory where the agent keeps a file"},
		{vocab.ReasonTrustMode, func(tok string) {
			must(t, os.WriteFile(tok, []byte("s.x"), 0o600))
			own(tok)
			must(t, os.Chmod(tok, 0o666))
		}, "is group- or world-writable"},
		{vocab.ReasonTrustOwner, func(tok string) { must(t, os.WriteFile(tok, []byte("s.x"), 0o600)); must(t, os.Lchown(tok, uid+1, -1)) }, "is another user's"},
	} {
		t.Run(string(c.reason), func(t *testing.T) {
			if c.reason == vocab.ReasonTrustOwner && os.Geteuid() != 0 {
				t.Skip("giving a file to another user takes root")
			}
			stateDir := filepath.Join(t.TempDir(), "my state")
			must(t, os.Mkdir(stateDir, 0o700))
			own(stateDir)
			tok := filepath.Join(stateDir, "bao.token")
			c.plant(tok)
			var te *files.TrustError
			if err := files.CheckFile(tok); !errors.As(err, &te) || te.Reason != c.reason || te.Path != tok {
				t.Fatalf("the trust check: %v, want a %s TrustError", err, c.reason)
			}
			in := localFailure(store.Box{StateDir: stateDir, User: name, Config: "/etc/m d/config.yaml"}, te.Reason, te.Path, at)
			in.Limits.Paths = explain.Paths{StateDir: stateDir, Config: "/etc/m d/config.yaml"}
			w := explain.Decide(in).Why
			if w == nil || w.Code != vocab.LocalFailure || !strings.Contains(w.Fault, tok+", which "+c.fault) {
				t.Fatalf("why %+v, want the fault to name %s", w, tok)
			}
			mend, rest, ok := strings.Cut(w.Fix, " && ")
			if !ok || mend != te.Fix || !strings.HasPrefix(rest, "sudo -u "+name+" monky-deployd --config '/etc/m d/config.yaml' run --once") {
				t.Fatalf("fix %q, want the agent's own %q, then its run --once", w.Fix, te.Fix)
			}
			if strings.Contains(w.Fix, "evidence") {
				t.Errorf("the fix sends the person to the evidence: %s", w.Fix)
			}
			runsAsPrinted(t, "fix", w.Fix, true)
			run := strings.TrimPrefix(strings.TrimPrefix(mend, "sudo -u "+name+" "), "sudo ")
			if out, err := exec.Command("bash", "-c", run).CombinedOutput(); err != nil {
				t.Fatalf("%q as printed: %v %s", mend, err, out)
			}
			if err := files.CheckFile(tok); err != nil {
				t.Errorf("after the fix: %v", err)
			}
		})
	}
	old := localFailure(store.Box{}, "", "", at)
	if w := explain.Decide(old).Why; w == nil || !strings.HasPrefix(w.Fix, "sudo ls -la /var/lib/monky-deployd") || strings.Contains(w.Fix, "evidence") {
		t.Errorf("a record that names no file: %+v", w)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
