package states

import (
	"errors"
	"fmt"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/logging"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// Log lines carry their priority by meaning (journalctl -p reads it):
//
//	error    Blocked, Refused, a parked Failed, a heartbeat that finds a service unwell; the
//	         closing line of a tick whose box needs a person (explain's verdict)
//	warning  a Failed that will be retried, a temporary failure; the closing line of a tick whose
//	         box is working on it
//	info     a transition, a heartbeat's one line, what changed the box or its token
//	debug    the rest: a heartbeat's own transitions, the check-in (the transition or the
//	         closing line that follows says it), a remembered refusal, park or block (the
//	         closing line says it)
//
// One line per fact: the tick's closing line does not repeat the words a line of the tick
// already said at its priority or above (it is then `exit N` with its fields), so a remembered
// refusal writes one error line a tick. Every line of a tick carries env_id and tick (the
// logger's context, set in Tick); a transition and the closing line also carry the state; a
// field is written only when it has a value. Under the journal's native protocol each field is
// a journal field (CODE, ENV_ID, TICK, STATE, EXIT; internal/logging).

// saidLine is the words of a line written at warning or error.
type saidLine struct {
	level zerolog.Level
	words string
}

// say remembers words written at level, when that is a warning or an error.
func (tk *tick) say(level zerolog.Level, words string) {
	if level >= zerolog.WarnLevel && words != "" {
		tk.said = append(tk.said, saidLine{level, words})
	}
}

// saidAlready reports whether a line of this tick at level or above said words (or all of them
// and more).
func (tk *tick) saidAlready(level zerolog.Level, words string) bool {
	for _, s := range tk.said {
		if s.level >= level && strings.Contains(words, s.words) {
			return true
		}
	}
	return false
}

// logTransition writes the one log line a transition gets: `From → To: CODE: detail`.
func (tk *tick) logTransition(t machine.Transition) {
	level := zerolog.InfoLevel
	switch {
	case t.To == machine.Blocked || t.To == machine.Refused:
		level = zerolog.ErrorLevel
	case t.To == machine.Failed && tk.eng.Record().Parked:
		level = zerolog.ErrorLevel
	case t.To == machine.Failed && tk.action == vocab.ActionNone:
		level = zerolog.ErrorLevel // a heartbeat that finds a service unwell needs a person
	case t.To == machine.Failed:
		level = zerolog.WarnLevel
	case tk.action == vocab.ActionNone:
		level = zerolog.DebugLevel // the heartbeat's closing line says it
	}
	d := withCode(t.Code, t.Detail)
	msg := string(t.From) + " → " + string(t.To)
	if d != "" {
		msg += ": " + d
	}
	ev := tk.Log.WithLevel(level).Str(logging.FieldEvent, t.Event).Str(logging.FieldState, string(t.To)).Int64(logging.FieldMs, t.Ms)
	if t.Code != "" {
		ev = ev.Str(logging.FieldCode, string(t.Code))
	}
	ev.Msg(msg)
	tk.say(level, d)
}

// logNote writes a journal note: `event: CODE: detail`.
func (tk *tick) logNote(e store.Entry) {
	level := zerolog.InfoLevel
	switch name := e.Event; {
	case name == machine.NoteCheckin, name == machine.NoteTickEnd, name == machine.NoteBlocked:
		// a check-in that resumes, or finds the sha still refused, parked or waiting for its
		// retry; a block that stands; a tick-end: the tick's closing line says it, at its
		// priority
		level = zerolog.DebugLevel
	case machine.IsStopNote(name), name == machine.NoteUnauthenticated, name == machine.NoteReportDropped:
		level = zerolog.WarnLevel
	}
	ev := tk.Log.WithLevel(level).Str(logging.FieldEvent, e.Event)
	if e.Code != "" {
		ev = ev.Str(logging.FieldCode, string(e.Code))
	}
	d := withCode(e.Code, e.Detail)
	ev.Msg(e.Event + ": " + d)
	tk.say(level, d)
}

// errNoVerdict: the tick's end did not commit, so no verdict was read with it.
var errNoVerdict = errors.New("no verdict")

// endLevel is the closing line's priority before its words: from the box's verdict when the
// tick's end read one (known), else from the exit code; NoLevel when neither raises it.
func endLevel(exit int, v explain.Verdict, known, laptop bool) zerolog.Level {
	switch {
	case !known && exit == vocab.ExitTemporary:
		return zerolog.WarnLevel
	case !known && exit != vocab.ExitOK:
		return zerolog.ErrorLevel
	case known && v.NeedsPerson():
		return zerolog.ErrorLevel
	case known && v.Verdict == explain.Working && !(laptop && exit == vocab.ExitOK):
		return zerolog.WarnLevel
	}
	return zerolog.NoLevel
}

// logEnd is the tick's closing line, at the priority of the box's verdict (explain's, read in
// the tick end's transaction): error when it needs a person, warning when it is working on it
// (a backoff, a temporary fault), and for a converged box info for a heartbeat's one line,
// debug otherwise. Without a verdict (the end did not commit), the exit's: error for 1 and 78,
// warning for 75. It carries the verdict and every active code.
func (tk *tick) logEnd(res Result, took time.Duration) {
	var v explain.Verdict
	var verr error = errNoVerdict
	if tk.verdict != nil {
		v, verr = *tk.verdict, nil
	}
	level := endLevel(res.Exit, v, verr == nil, tk.Cfg.LaptopMode)
	var msg string
	if res.Exit == vocab.ExitOK {
		rec := tk.eng.Record()
		if tk.action == vocab.ActionNone && rec.AppliedSha != "" {
			words := tk.judged // the heartbeat's judgement of the release; else what the record lists
			if words == "" {
				words = healthWords(rec.Containers)
			}
			msg = fmt.Sprintf("heartbeat: %s runs, %s", machine.ShortSha(rec.AppliedSha), words)
			if level == zerolog.NoLevel {
				level = zerolog.InfoLevel
			}
		} else {
			msg = "tick done: " + string(tk.eng.State())
		}
	}
	if level == zerolog.NoLevel {
		level = zerolog.DebugLevel
	}
	if msg == "" {
		msg = fmt.Sprintf("exit %d", res.Exit)
		// one line per fact: words a warning or an error of this tick said are not said again,
		// even when the verdict raises the closing line above them (its codes name them)
		if res.Err != nil && !tk.saidAlready(min(level, zerolog.WarnLevel), res.Err.Error()) {
			msg += ": " + res.Err.Error()
		}
	}
	ev := tk.Log.WithLevel(level).Int(logging.FieldExit, res.Exit).Str(logging.FieldState, string(tk.eng.State())).Int64(logging.FieldMs, took.Milliseconds())
	if c := codeOf(res.Err); c != "" {
		ev = ev.Str(logging.FieldCode, string(c))
	}
	if verr == nil {
		ev = ev.Str("verdict", v.Verdict)
		if len(v.Codes) > 0 {
			ev = ev.Str("codes", strings.Join(v.Codes, ","))
		}
	}
	ev.Msg(msg)
}

// codeOf is the code a closing line carries for err: its effect's, STATE_FILE_LOCKED for the
// state file held by another process past the wait; "" when it has none.
func codeOf(err error) vocab.Code {
	if c := effects.CodeOf(err); c != "" {
		return c
	}
	if errors.Is(err, store.ErrLocked) {
		return vocab.StateFileLocked
	}
	return ""
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
func withCode(c vocab.Code, detail string) string {
	code := string(c)
	switch {
	case code == "" || strings.HasPrefix(detail, code) || strings.Contains(detail, code+":"):
		return detail
	case detail == "":
		return code
	}
	return code + ": " + detail
}

// agentCommand is the agent's subcommand sub as a person on this box types it: as the agent's
// user (the one this runs as), with this box's --config when it is not the packaged default
// (typed without it, the command would read the default config and another state file).
func (a *Agent) agentCommand(sub string) string {
	cmd := "sudo -u " + sanitize.ShellWord(UserName()) + " monky-deployd "
	if p := a.Cfg.Path; p != "" && p != config.DefaultPath {
		cmd += "--config " + sanitize.ShellWord(p) + " "
	}
	return cmd + sub
}
