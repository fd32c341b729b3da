package states_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tikali/monky-deployd/store"
)

// faultyStore fails, or deletes the state file, at its nth write transaction.
type faultyStore struct {
	store.Store
	n, at  int
	err    error
	remove string
}

func (f *faultyStore) Update(fn func(store.Tx) error) error {
	f.n++
	if f.n == f.at {
		if f.remove != "" {
			os.Remove(f.remove)
		} else {
			return f.err
		}
	}
	return f.Store.Update(fn)
}

// A state commit that fails (a full or read-only disk) ends the tick with exit 1 and a
// message naming the fault; the next tick, with the disk back, converges from the last
// committed state with no second lease.
func TestAFailedStateCommitStopsTheTickAndResumes(t *testing.T) {
	for _, fault := range []error{syscall.ENOSPC, syscall.EROFS} {
		for at := 2; at <= 8; at++ {
			t.Run(fault.Error()+"/commit-"+string(rune('0'+at)), func(t *testing.T) {
				h := newHarness(t)
				h.release("v1", nil)
				a := h.agent()
				a.Store = &faultyStore{Store: h.st, at: at, err: fault}
				res := a.Tick(context.Background())
				if res.Exit == 0 {
					t.Fatalf("the tick ignored a failed state commit: exit 0")
				}
				if res.Exit != 1 || !errors.Is(res.Err, fault) && !strings.Contains(res.Err.Error(), fault.Error()) {
					t.Fatalf("exit %d err %v, want 1 naming %q", res.Exit, res.Err, fault)
				}
				h.clock.Advance(60e9)
				h.wantExit(h.tick(), 0)
				if rec := h.record(); rec.State != "Reported" || rec.AppliedSha == "" {
					t.Errorf("after the disk came back: state %s applied %q", rec.State, rec.AppliedSha)
				}
				if c := h.sim.Counts(env); c.Leases > 1 {
					t.Errorf("%d leases", c.Leases)
				}
			})
		}
	}
}

// The state file deleted in the middle of a tick: the tick goes on with what it holds in
// memory, writing a fresh file, and the box stays converged.
func TestTheStateFileDeletedMidTick(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	a := h.agent()
	a.Store = &faultyStore{Store: h.st, at: 4, remove: filepath.Join(h.cfg.StateDir, "state.db")}
	if res := a.Tick(context.Background()); res.Exit != 0 {
		t.Fatalf("exit %d: %v", res.Exit, res.Err)
	}
	h.clock.Advance(60e9)
	h.wantExit(h.tick(), 0)
	if rec := h.record(); rec.State != "Reported" || rec.AppliedSha == "" {
		t.Errorf("state %s applied %q", rec.State, rec.AppliedSha)
	}
	if c := h.sim.Counts(env); c.Leases != 1 {
		t.Errorf("%d leases", c.Leases)
	}
}
