package states_test

import (
	"context"
	"io"
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// fullFS is the agent's files on a disk that is full while full is set: every write of a file
// fails as the kernel fails it (ENOSPC, with the file's path).
type fullFS struct {
	files.FS
	full *atomic.Bool
}

func (f fullFS) WriteFile(path string, data []byte, perm fs.FileMode) error {
	if f.full.Load() {
		return &fs.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	}
	return f.FS.WriteFile(path, data, perm)
}

func (f fullFS) WriteFileFrom(path string, r io.Reader, perm fs.FileMode) error {
	if f.full.Load() {
		return &fs.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	}
	return f.FS.WriteFileFrom(path, r, perm)
}

// TestAFullDiskIsRedAndClearsByItself: an apply whose own files cannot be written (no space) is
// STATE_UNWRITABLE from its first tick — the journal, the closing line and status name the file
// and the cause, the verdict needs a person — spends no attempt, never parks, and the first tick
// after space is freed applies the release by itself.
func TestAFullDiskIsRedAndClearsByItself(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	v2 := h.release("v2", nil)
	full := &atomic.Bool{}
	full.Store(true)
	tick := func() int {
		a := h.agent()
		a.FS = fullFS{FS: files.OS, full: full}
		res := a.Tick(context.Background())
		h.clock.Advance(machine.Backoff(1)) // past any backoff: a retry would be due
		return res.Exit
	}
	for i := 0; i < 7; i++ {
		h.logs.Reset()
		h.wantExit(tick(), 1)
		e, ok := h.entry(func(e store.Entry) bool { return e.Event == machine.EvFail })
		if !ok || e.Code != vocab.StateUnwritable || !strings.Contains(e.Detail, "no space left on device") || !strings.Contains(e.Detail, h.cfg.DeployDir) {
			t.Fatalf("tick %d: the fail entry %+v, want STATE_UNWRITABLE naming a file under %s and the cause", i+1, e, h.cfg.DeployDir)
		}
		if !strings.Contains(h.logs.String(), `"exit":1`) || !strings.Contains(h.logs.String(), `"code":"STATE_UNWRITABLE"`) {
			t.Fatalf("tick %d: the closing line does not name STATE_UNWRITABLE:\n%s", i+1, h.logs.String())
		}
		rec := h.record()
		if rec.Parked || rec.TotalAttempts() != 0 {
			t.Fatalf("tick %d: parked %v after %d attempts: a full disk spends none", i+1, rec.Parked, rec.TotalAttempts())
		}
		st, err := explain.BuildStatusWith(h.st, h.clock.Now(), nil, explain.LimitsOf(h.cfg))
		if err != nil || st.Verdict != explain.NeedsPerson || len(st.Codes) == 0 || st.Codes[0] != string(vocab.StateUnwritable) {
			t.Fatalf("tick %d: status %s %v (%v), want needs_person STATE_UNWRITABLE", i+1, st.Verdict, st.Codes, err)
		}
	}
	full.Store(false)
	h.wantExit(tick(), 0)
	if rec := h.record(); rec.AppliedSha != v2 {
		t.Fatalf("after space was freed the box applies %s, want v2 %s", rec.AppliedSha, v2)
	}
	st, err := explain.BuildStatusWith(h.st, h.clock.Now(), nil, explain.LimitsOf(h.cfg))
	if err != nil || st.Verdict != explain.Converged {
		t.Fatalf("after space was freed: status %s %v (%v), want converged", st.Verdict, st.Codes, err)
	}
}
