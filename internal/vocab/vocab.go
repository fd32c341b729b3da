// Package vocab is the agent's one vocabulary of codes: every code it journals, reports or finds
// is a constant of type Code defined here once, and the one registry of causes gives each its
// kind, its fault in one sentence and the command that fixes or checks it. The raisers (bundle,
// transport, effects, the machine and its steps) name the constants; explain, status, the docs'
// table and a failed report's why read the registry.
//
// It also words a classified error once (ErrorText), for effects and transport alike. It sits
// below every other package of the agent and imports none of them.
package vocab

import "sort"

// Code names a fault in the journal, the state file, a report and explain's output.
type Code string

// Kind is what a code's fault does to the box.
type Kind int

const (
	// KindRefusal: the desired sha's bundle is refused before any lease; it is not fetched again.
	KindRefusal Kind = iota + 1
	// KindFailure: a step failed; the attempt is counted and retried until the limit parks it.
	KindFailure
	// KindBlock: only a person, a changed config or a new grant clears it; every tick ends at once.
	KindBlock
	// KindTemporary: the tick stopped where it was (exit 75); the next tick resumes the step.
	KindTemporary
	// KindFinding: no step failed; explain finds the box not well (a token, the outbox, the timer).
	KindFinding
)

func (k Kind) String() string {
	switch k {
	case KindRefusal:
		return "refusal"
	case KindFailure:
		return "failure"
	case KindBlock:
		return "block"
	case KindTemporary:
		return "temporary"
	case KindFinding:
		return "finding"
	}
	return "unknown"
}

// Cause is the fixed part of a code's explanation.
type Cause struct {
	Kind  Kind
	Fault string // the fault in one sentence, without its full stop
	// Fix is the one command that fixes or checks it, a line bash runs as printed: a command
	// first, never only a comment, and a follow-up command joined to it (`&& …`), never inside
	// its `# …` comment, which holds words only. A cause no command on this box addresses (the
	// bundle's publisher or tenancy's operators act) says so in words instead: NoCommand, then
	// what to do. It may hold {project}, {env}, {kv_mount}, the agent's user {user} (sudo -u
	// {user}) and the box's paths: {state_dir}, {deploy_dir}, {config}, {bootstrap}, {bao_ca},
	// which explain fills from the record, shell-quoted; and {sha}, the desired sha whole.
	Fix string
	// Clears, for a refusal, is what clears it ("" when the fix says).
	Clears string
}

// NoCommand begins a fix that is words, not a command: no command on this box addresses the
// cause (the bundle's publisher or tenancy's operators act), and the words say what to do.
const NoCommand = "no command: "

// CauseOf is code's row of the registry; ok is false for a code the agent does not know (one of
// tenancy's or OpenBao's own).
func CauseOf(code Code) (c Cause, ok bool) {
	c, ok = causes[code]
	return c, ok
}

// Known reports whether code has a row.
func Known(code Code) bool {
	_, ok := causes[code]
	return ok
}

// Codes is every code of the registry, in code order.
func Codes() []Code {
	out := make([]Code, 0, len(causes))
	for c := range causes {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
