package states

import (
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/logging"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// Log lines carry their priority by meaning (journalctl -p reads it):
//
//	error    Blocked, Refused, a parked Failed, a tick that ends with exit 1 or 78
//	warning  a Failed that will be retried, a temporary failure (exit 75)
//	info     a transition, a heartbeat's one line, what changed the box or its token
//	debug    the rest: a heartbeat's own transitions and check-in
//
// Every line of a tick carries env_id and tick (the logger's context, set in Tick); a field
// is written only when it has a value.

// logTransition writes the one log line a transition gets: `From → To: CODE: detail`.
func (tk *tick) logTransition(t machine.Transition) {
	var ev *zerolog.Event
	switch {
	case t.To == machine.Blocked || t.To == machine.Refused:
		ev = tk.Log.Error()
	case t.To == machine.Failed && tk.eng.Record().Parked:
		ev = tk.Log.Error()
	case t.To == machine.Failed:
		ev = tk.Log.Warn()
	case tk.action == effects.ActionNone:
		ev = tk.Log.Debug() // the heartbeat's closing line says it
	default:
		ev = tk.Log.Info()
	}
	msg := string(t.From) + " → " + string(t.To)
	if d := withCode(t.Code, t.Detail); d != "" {
		msg += ": " + d
	}
	ev = ev.Str(logging.FieldEvent, t.Event).Int64(logging.FieldMs, t.Ms)
	if t.Code != "" {
		ev = ev.Str(logging.FieldCode, t.Code)
	}
	ev.Msg(redact.String(msg))
}

// logNote writes a journal note: `event: CODE: detail`.
func (tk *tick) logNote(e store.Entry) {
	var ev *zerolog.Event
	rec := tk.eng.Record()
	switch name := e.Event; {
	case name == machine.NoteBlocked:
		ev = tk.Log.Error()
	case name == machine.NoteCheckin && e.Code != "" && (rec.Refusal != nil || rec.Parked):
		ev = tk.Log.Error() // still refused, parked
	case name == machine.NoteCheckin && e.Code != "":
		ev = tk.Log.Warn() // retry n of m at
	case name == machine.NoteCheckin, name == machine.NoteTickEnd:
		ev = tk.Log.Debug() // a tick-end: the tick's closing line says it, at its priority
	case machine.IsStopNote(name), name == machine.NoteUnauthenticated, name == machine.NoteReportDropped:
		ev = tk.Log.Warn()
	default:
		ev = tk.Log.Info()
	}
	ev = ev.Str(logging.FieldEvent, e.Event)
	if e.Code != "" {
		ev = ev.Str(logging.FieldCode, e.Code)
	}
	ev.Msg(redact.String(e.Event + ": " + withCode(e.Code, e.Detail)))
}

// logEnd is the tick's closing line, at the priority of its exit: error for 1 and 78, warning
// for 75; for a heartbeat that converged it is the heartbeat's one info line.
func (tk *tick) logEnd(res Result, took time.Duration) {
	var ev *zerolog.Event
	var msg string
	switch res.Exit {
	case ExitOK:
		rec := tk.eng.Record()
		if tk.action == effects.ActionNone && rec.AppliedSha != "" {
			ev = tk.Log.Info()
			msg = fmt.Sprintf("heartbeat: %s runs, %s", machine.ShortSha(rec.AppliedSha), healthWords(rec.Containers))
		} else {
			ev = tk.Log.Debug()
			msg = "tick done: " + string(tk.eng.State())
		}
	case ExitTemporary:
		ev = tk.Log.Warn()
	default:
		ev = tk.Log.Error()
	}
	if msg == "" {
		msg = fmt.Sprintf("exit %d", res.Exit)
		if res.Err != nil {
			msg += ": " + res.Err.Error()
		}
	}
	ev = ev.Int(logging.FieldExit, res.Exit).Int64(logging.FieldMs, took.Milliseconds())
	if c := effects.CodeOf(res.Err); res.Err != nil && c != "" {
		ev = ev.Str(logging.FieldCode, c)
	}
	ev.Msg(redact.String(msg))
}

func healthWords(cs []store.Container) string {
	ok := 0
	for _, c := range cs {
		if effects.Container(c).Healthy() {
			ok++
		}
	}
	return fmt.Sprintf("%d/%d services healthy", ok, len(cs))
}

// withCode puts the code in front of the detail unless the detail starts with it.
func withCode(code, detail string) string {
	switch {
	case code == "" || strings.HasPrefix(detail, code) || strings.Contains(detail, code+":"):
		return detail
	case detail == "":
		return code
	}
	return code + ": " + detail
}
