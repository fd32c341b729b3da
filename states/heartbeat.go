package states

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/phase"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// heartbeat is action none: the box runs what tenancy wants; report its health. psErr is the
// tick's `compose ps` error: one of RELEASE_CHANGED (the release on disk is no longer what was
// verified, so compose was not run) is the report's fault, whatever runs; any other is
// UNHEALTHY saying that ps failed, not that nothing runs.
func (tk *tick) heartbeat(ctx context.Context, resp effects.CheckinResponse, containers []effects.Container, psErr error) error {
	rec := tk.eng.Record()
	if rec.AppliedSha == "" && resp.DesiredSha == "" && tk.eng.State().Rest() {
		return tk.eng.Note(machine.NoteCheckin, "", "", "action=none: nothing is deployed yet and tenancy wants nothing", tk.Now(), nil)
	}
	services := tk.services()
	j := judge(containers, services, 0, restarts(containers, tk.before, tk.beforeAt, tk.listedFrom))
	tk.judged = j.words()
	code, bad := vocab.Unhealthy, j.bad
	var reason vocab.Reason
	switch {
	case effects.CodeOf(psErr) == vocab.ReleaseChanged:
		code, bad = vocab.ReleaseChanged, []string{sanitize.Line(psErr.Error())}
	case psErr != nil: // the containers were not looked at: say why, not that none runs
		reason = vocab.ReasonPSFailed
		bad = []string{"compose ps failed: " + sanitize.Line(firstLine(strings.TrimPrefix(psErr.Error(), "compose ps: ")))}
	case len(containers) == 0 && services == nil:
		bad = []string{"no containers of project " + tk.Cfg.ComposeProject + " are running"}
	}
	if len(bad) == 0 && tk.outboxEmpty && (tk.eng.State() == machine.Idle || tk.eng.State() == machine.Reported) {
		if ok := tk.heartbeatAtOnce(ctx, resp, rec, containers, j.words()); ok {
			return nil
		}
	}
	if err := tk.startFlight(resp, "", checkinDetail(resp, rec.AppliedSha)); err != nil {
		return err
	}
	started := tk.Now()
	words := j.words()
	if len(j.down)+len(j.again) > 0 && code == vocab.Unhealthy && psErr == nil && tk.Cfg.Heals() && tk.Cfg.HealBudget > 0 && rec.AppliedSha != "" && tk.held == nil {
		healed, spent, err := tk.heal(ctx, strings.Join(bad, ", "))
		switch {
		case err != nil:
			return err
		case healed:
			containers, bad, words = tk.gated, nil, tk.gatedWords
			tk.judged = words
		case spent:
			code = vocab.CrashLoop
			bad = append(bad, fmt.Sprintf("healed %d times in the last hour (heal_budget %d): not healed again", tk.Cfg.HealBudget, tk.Cfg.HealBudget))
		default:
			bad = append(bad, "a heal (compose up -d) did not bring it back: "+tk.healWords)
		}
	}
	if len(j.down)+len(j.again) > 0 && tk.held != nil {
		bad = append(bad, fmt.Sprintf("not healed: held by %s until %s", tk.held.By, machine.Stamp(tk.held.Until)))
	}
	rep := effects.Report{Sha: rec.AppliedSha, Containers: containers}
	if len(bad) == 0 {
		rep.Result = effects.ResultApplied
		detail := words
		if err := tk.eng.Fire(machine.Outcome{Event: machine.EvHealthy, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
			r.Containers, r.SeenAt = toStore(containers), tk.Now() // a heal's: what runs now
			return tk.enqueue(r, tx, machine.Healthy, rep)
		}}, started); err != nil {
			return err
		}
		return tk.flushOutbox(ctx)
	}
	rep.Result, rep.Code = effects.ResultFailed, code
	rep.Detail = string(code) + ": " + strings.Join(bad, ", ")
	if code == vocab.Unhealthy || code == vocab.CrashLoop {
		rep.LogTail = tk.logTail(ctx) // on a changed release compose logs is refused as ps was
	}
	if err := tk.eng.Fire(machine.Outcome{Event: machine.EvFail, Code: code, Reason: reason, Detail: rep.Detail, Update: func(r *store.Record, tx store.Tx) error {
		return tk.enqueue(r, tx, machine.Failed, rep)
	}}, started); err != nil {
		return err
	}
	if err := tk.flushOutbox(ctx); err != nil {
		return err
	}
	return &effects.Error{Op: "heartbeat", Kind: effects.Permanent, Code: code, Reason: reason, Msg: rep.Detail}
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// heal runs compose up -d of the applied release's resolved model again (no lease, no OpenBao
// read: the release's files, .env and model are on disk as they were applied) and waits the
// health gate, within heal_budget heals in a rolling hour. found says what the heartbeat found.
// It reports whether the release was healed (tk.gated then holds its containers), and whether
// the budget was spent so that no heal ran.
func (tk *tick) heal(ctx context.Context, found string) (healed, spent bool, err error) {
	started := tk.Now()
	rec := tk.eng.Record()
	recent := healsSince(rec.Heals, started.Add(-time.Hour))
	if len(recent) >= tk.Cfg.HealBudget {
		return false, true, nil
	}
	detail := fmt.Sprintf("found %s; compose up -d of %s (heal %d of heal_budget %d this hour)", found, machine.ShortSha(rec.AppliedSha), len(recent)+1, tk.Cfg.HealBudget)
	if err := tk.eng.Note(machine.NoteHeal, vocab.Unhealthy, "", detail, started, func(r *store.Record, _ store.Tx) error {
		r.Heals = append(healsSince(r.Heals, started.Add(-time.Hour)), started)
		return nil
	}); err != nil {
		return false, false, err
	}
	if err := tk.Fx.Compose.Up(ctx, tk.currentDir()); err != nil {
		if effects.IsTemporary(err) {
			return false, false, err
		}
		tk.healWords = sanitize.Line(err.Error())
		return false, false, nil
	}
	if err := tk.gate(ctx, tk.Now()); err != nil {
		var unwell *notServing
		if errors.As(err, &unwell) {
			tk.healWords = unwell.detail
			return false, false, nil
		}
		return false, false, err
	}
	done := fmt.Sprintf("HEALED: found %s; ran compose up -d of %s; %s", found, machine.ShortSha(rec.AppliedSha), tk.gatedWords)
	if err := tk.eng.Note(machine.NoteHealed, "", "", done, started, nil); err != nil {
		return false, false, err
	}
	return true, false, nil
}

// keepServing judges the release a parked revert brought back (current points at it) as every
// heartbeat does, and heals it within heal_budget when it is not running: the parked failure
// of the newer sha stays as it is (no flight starts, nothing is reported). It returns the
// words of what serves ("which serves", "which serves again (HEALED: …)"), and when that
// release is not serving, what was found and why it was not healed, with its code (UNHEALTHY,
// or CRASH_LOOP past heal_budget), as a heartbeat would report them.
func (tk *tick) keepServing(ctx context.Context) (words string, down servingFault, err error) {
	if tk.listErr != nil {
		down = servingFault{vocab.Unhealthy, "compose ps failed: " + sanitize.Line(firstLine(strings.TrimPrefix(tk.listErr.Error(), "compose ps: ")))}
		return "whose containers could not be listed (" + down.detail + ")", down, nil
	}
	services := tk.services()
	j := judge(tk.listed, services, 0, restarts(tk.listed, tk.before, tk.beforeAt, tk.listedFrom))
	tk.judged = j.words()
	if len(tk.listed) == 0 && services == nil {
		down = servingFault{vocab.Unhealthy, "no containers of project " + tk.Cfg.ComposeProject + " are running"}
		return "which is not serving: " + down.detail, down, nil
	}
	if j.ok() {
		return "which serves (" + j.words() + ")", servingFault{}, nil
	}
	found := strings.Join(j.bad, ", ")
	down = servingFault{vocab.Unhealthy, found}
	switch {
	case len(j.down)+len(j.again) == 0:
	case tk.held != nil:
		down.detail += fmt.Sprintf("; not healed: held by %s until %s", tk.held.By, machine.Stamp(tk.held.Until))
	case !tk.Cfg.Heals() || tk.Cfg.HealBudget <= 0:
		down.detail += " (heal is off)"
	default:
		healed, spent, err := tk.heal(ctx, found)
		switch {
		case err != nil:
			return "", servingFault{}, err
		case healed:
			tk.judged = tk.gatedWords
			cs, at := toStore(tk.gated), tk.Now()
			tk.eng.Defer(func(r *store.Record) { r.Containers, r.SeenAt = cs, at }) // a heal's: what runs now
			return "which serves again (HEALED: " + tk.gatedWords + ")", servingFault{}, nil
		case spent:
			down = servingFault{vocab.CrashLoop, fmt.Sprintf("%s; healed %d times in the last hour (heal_budget %d): not healed again", found, tk.Cfg.HealBudget, tk.Cfg.HealBudget)}
		default:
			down.detail += "; a heal (compose up -d) did not bring it back: " + tk.healWords
		}
	}
	return "which is not serving: " + down.detail, down, nil
}

// servingFault is what a parked revert's tick found of the release it brought back when that
// release is not serving: the code a heartbeat would report, and the words; zero while it serves.
type servingFault struct {
	code   vocab.Code
	detail string
}

// healsSince are the heals at or after since.
func healsSince(heals []time.Time, since time.Time) []time.Time {
	var out []time.Time
	for _, t := range heals {
		if !t.Before(since) {
			out = append(out, t)
		}
	}
	return out
}

// heartbeatAtOnce is the heartbeat of a converged box (at rest, every container healthy,
// nothing in the outbox): its report is sent first, and its transitions (checked in, healthy,
// reported) are written afterwards with the tick's end, in one transaction (tick.tail). A
// tick that dies before that commit has changed nothing on disk: the next tick is simply this
// heartbeat again, and tenancy takes the same report twice. It returns false, having written
// and sent nothing that counts, when the report was not acknowledged: the caller then takes
// the outbox's way, which keeps the report until tenancy has it.
func (tk *tick) heartbeatAtOnce(ctx context.Context, resp effects.CheckinResponse, rec store.Record, containers []effects.Container, words string) bool {
	started := tk.Now()
	rep := tk.outgoing(effects.Report{Sha: rec.AppliedSha, Result: effects.ResultApplied, Containers: containers})
	if err := tk.Fx.Tenancy.Report(ctx, tk.token, rep); err != nil {
		// the outbox's send that follows says it, once
		tk.Log.Debug().Msg("report not acknowledged; it goes to the outbox: " + err.Error())
		return false
	}
	phase.Mark("report")
	tk.tail = func() error {
		if err := tk.startFlight(resp, "", checkinDetail(resp, rec.AppliedSha)); err != nil {
			return err
		}
		if err := tk.eng.Fire(machine.Outcome{Event: machine.EvHealthy, Detail: words, Update: func(r *store.Record, _ store.Tx) error {
			r.LastReport = &store.LastReport{Result: rep.Result, Sha: rep.Sha, Detail: rep.Detail, At: started, Acknowledged: true}
			return nil
		}}, started); err != nil {
			return err
		}
		detail := "report " + rep.Result
		if rep.Sha != "" {
			detail += " for " + machine.ShortSha(rep.Sha)
		}
		return tk.eng.Fire(machine.Outcome{Event: machine.EvReport, Detail: detail + " acknowledged"}, started)
	}
	return true
}
