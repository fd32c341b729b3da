package rig

import (
	"strings"
	"testing"
	"time"
)

// The rig's knobs do what the year's counts assume: a plain release applies and heartbeats,
// a refuse- release is refused, a bad- release fails health, and the effects' time is summed.
func TestWorldReleasesBehaveAsNamed(t *testing.T) {
	w, err := NewWorld(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	step := func(want int, wantErr string) {
		t.Helper()
		res := w.Tick()
		w.Clock.Advance(time.Minute)
		if res.Exit != want {
			t.Fatalf("exit %d, want %d: %v", res.Exit, want, res.Err)
		}
		if wantErr != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), wantErr)) {
			t.Fatalf("error %v, want one containing %q", res.Err, wantErr)
		}
	}
	if _, err := w.Release("r1", nil); err != nil {
		t.Fatal(err)
	}
	step(0, "")
	step(0, "")
	if w.Waits.Total() <= 0 {
		t.Fatal("no time was counted inside the effects")
	}
	reps := w.Sim.Reports(w.Env)
	if len(reps) != 2 || reps[1].Result != "applied" {
		t.Fatalf("reports %+v, want 2 applied", reps)
	}
	if _, err := w.Release("refuse-r2", nil); err != nil {
		t.Fatal(err)
	}
	step(1, "UNSUPPLIED")
	if _, err := w.Release("bad-r3", nil); err != nil {
		t.Fatal(err)
	}
	step(1, "UNHEALTHY")
}
