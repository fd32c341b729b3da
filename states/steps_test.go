package states

import (
	"testing"

	"github.com/tikali/monky-deployd/machine"
)

// TestEveryStateInFlightHasItsStep keeps the apply path's table whole: a state an apply can be
// resumed at has exactly one step leaving it, and a state a tick may rest in has none (drive ends
// the flight there). Down belongs to the retire path, which runs in one go (retire.go).
func TestEveryStateInFlightHasItsStep(t *testing.T) {
	for _, s := range machine.All {
		_, ok := steps[s]
		switch {
		case s == machine.Down:
			if ok {
				t.Errorf("Down has an apply step; the retire path runs it in retire.go")
			}
		case s.InFlight() && !ok:
			t.Errorf("state %s is resumable but no step leaves it (add a row to steps in steps.go)", s)
		case s.Rest() && ok:
			t.Errorf("state %s is a resting state but has a step", s)
		}
	}
}
