package states

import (
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// logTransition writes the one log line a transition gets.
func (a *Agent) logTransition(t machine.Transition) {
	ev := a.Log.Info()
	if t.To == machine.Failed || t.To == machine.Refused || t.To == machine.Blocked {
		ev = a.Log.Warn()
	}
	msg := string(t.From) + " → " + string(t.To)
	if t.Detail != "" {
		msg += ": " + t.Detail
	}
	ev.Uint64("tick", t.Tick).Str("event", t.Event).Str("code", t.Code).Int64("ms", t.Ms).Msg(redact.String(msg))
}

func (a *Agent) logNote(e store.Entry) {
	ev := a.Log.Info()
	if e.Event == machine.NoteCheckinFailed {
		ev = a.Log.Warn()
	}
	ev.Uint64("tick", e.Tick).Str("event", e.Event).Str("code", e.Code).Msg(redact.String(e.Event + ": " + e.Detail))
}
