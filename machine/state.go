// Package machine is the agent's state machine: the states, the transition table (on
// looplab/fsm), and the Engine, the one place that changes state. The Engine commits a
// transition and its journal entry in one store transaction, after the step's side effect is
// done. It performs no network or docker I/O and reads time only from its injected clock.
package machine

import "fmt"

// State is a machine state. The store keeps its name; a name read back is validated by Parse.
type State string

// The states (docs/MACHINE.md, "The states").
const (
	Idle           State = "Idle"
	CheckedIn      State = "CheckedIn"
	BundleVerified State = "BundleVerified"
	Refused        State = "Refused"
	Leased         State = "Leased"
	LoggedIn       State = "LoggedIn"
	Staged         State = "Staged"
	Pulled         State = "Pulled"
	Up             State = "Up"
	Healthy        State = "Healthy"
	Failed         State = "Failed"
	Reverting      State = "Reverting"
	Reported       State = "Reported"
	Down           State = "Down"
	Blocked        State = "Blocked"
)

// All lists every state in the order the docs draw them.
var All = []State{Idle, CheckedIn, BundleVerified, Refused, Leased, LoggedIn, Staged, Pulled, Up, Healthy, Failed, Reverting, Down, Reported, Blocked}

func (s State) String() string { return string(s) }

// Parse validates a state name read from disk or typed by a person.
func Parse(name string) (State, error) {
	for _, s := range All {
		if string(s) == name {
			return s, nil
		}
	}
	return "", fmt.Errorf("unknown machine state %q", name)
}

// Rest reports whether a tick may end in s with nothing in flight: the next tick starts over
// from a check-in. Reported and Idle are converged; Refused, Failed and Blocked are parked.
func (s State) Rest() bool {
	switch s {
	case Idle, Reported, Refused, Failed, Blocked:
		return true
	}
	return false
}

// InFlight reports whether s is part-way through an apply or a retire, to be resumed.
func (s State) InFlight() bool { return !s.Rest() }
