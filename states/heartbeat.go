package states

import (
	"context"
	"fmt"
	"strings"

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
		return tk.eng.Note(machine.NoteCheckin, "", "action=none: nothing is deployed yet and tenancy wants nothing", tk.Now(), nil)
	}
	code, bad := vocab.Unhealthy, unhealthy(containers)
	var reason vocab.Reason
	switch {
	case effects.CodeOf(psErr) == vocab.ReleaseChanged:
		code, bad = vocab.ReleaseChanged, []string{sanitize.Line(psErr.Error())}
	case psErr != nil: // the containers were not looked at: say why, not that none runs
		reason = vocab.ReasonPSFailed
		bad = []string{"compose ps failed: " + sanitize.Line(firstLine(strings.TrimPrefix(psErr.Error(), "compose ps: ")))}
	case len(containers) == 0:
		bad = []string{"no containers of project " + tk.Cfg.ComposeProject + " are running"}
	}
	if len(bad) == 0 && tk.outboxEmpty && (tk.eng.State() == machine.Idle || tk.eng.State() == machine.Reported) {
		if ok := tk.heartbeatAtOnce(ctx, resp, rec, containers); ok {
			return nil
		}
	}
	if err := tk.startFlight(resp, "", checkinDetail(resp, rec.AppliedSha)); err != nil {
		return err
	}
	started := tk.Now()
	rep := effects.Report{Sha: rec.AppliedSha, Containers: containers}
	if len(bad) == 0 {
		rep.Result = effects.ResultApplied
		detail := healthyDetail(containers)
		if err := tk.eng.Fire(machine.Outcome{Event: machine.EvHealthy, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
			return tk.enqueue(r, tx, machine.Healthy, rep)
		}}, started); err != nil {
			return err
		}
		return tk.flushOutbox(ctx)
	}
	rep.Result, rep.Code = effects.ResultFailed, code
	rep.Detail = string(code) + ": " + strings.Join(bad, ", ")
	if code == vocab.Unhealthy {
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

func healthyDetail(cs []effects.Container) string {
	return fmt.Sprintf("%d/%d services healthy", len(cs), len(cs))
}

// heartbeatAtOnce is the heartbeat of a converged box (at rest, every container healthy,
// nothing in the outbox): its report is sent first, and its transitions (checked in, healthy,
// reported) are written afterwards with the tick's end, in one transaction (tick.tail). A
// tick that dies before that commit has changed nothing on disk: the next tick is simply this
// heartbeat again, and tenancy takes the same report twice. It returns false, having written
// and sent nothing that counts, when the report was not acknowledged: the caller then takes
// the outbox's way, which keeps the report until tenancy has it.
func (tk *tick) heartbeatAtOnce(ctx context.Context, resp effects.CheckinResponse, rec store.Record, containers []effects.Container) bool {
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
		if err := tk.eng.Fire(machine.Outcome{Event: machine.EvHealthy, Detail: healthyDetail(containers), Update: func(r *store.Record, _ store.Tx) error {
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
