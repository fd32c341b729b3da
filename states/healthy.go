package states

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/phase"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// startFlight moves the machine to CheckedIn for a flight of action towards sha: from a rest
// state by a check-in, from a flight in progress by superseding it.
func (a *Agent) startFlight(resp effects.CheckinResponse, event, detail string) error {
	st := a.eng.State()
	rec := a.eng.Record()
	if event == "" {
		event = machine.EvCheckin
		if st.InFlight() {
			event = machine.EvSupersede
			detail = fmt.Sprintf("superseded: %s %s → %s %s; %s", rec.Action, short(rec.Sha), resp.Action, short(resp.DesiredSha), detail)
		}
	}
	return a.eng.Fire(machine.Outcome{Event: event, Detail: detail, Update: func(r *store.Record, _ store.Tx) error {
		if r.Sha != resp.DesiredSha || r.Action != resp.Action {
			r.Attempts, r.NextRetryAt, r.Parked = nil, timeZero, false
		}
		r.Action, r.Sha, r.BundleURL, r.Purge = resp.Action, resp.DesiredSha, resp.BundleURL, resp.PurgeVolumes
		if r.Refusal != nil && r.Refusal.Sha != resp.DesiredSha {
			r.Refusal = nil
		}
		if r.Failure != nil && r.Failure.Sha != resp.DesiredSha {
			r.Failure = nil
		}
		return nil
	}}, a.Now())
}

func checkinDetail(resp effects.CheckinResponse, applied string) string {
	return fmt.Sprintf("action=%s desired=%s applied=%s", resp.Action, short(resp.DesiredSha), short(applied))
}

// heartbeat is action none: the box runs what tenancy wants; report its health.
func (a *Agent) heartbeat(ctx context.Context, resp effects.CheckinResponse, containers []effects.Container) error {
	rec := a.eng.Record()
	if rec.AppliedSha == "" && resp.DesiredSha == "" && a.eng.State().Rest() {
		return a.eng.Note(machine.NoteCheckin, "", "action=none: nothing is deployed yet and tenancy wants nothing", a.Now(), nil)
	}
	bad := unhealthy(containers)
	if len(containers) == 0 {
		bad = []string{"no containers of project " + a.Cfg.ComposeProject + " are running"}
	}
	if len(bad) == 0 && a.outboxEmpty && (a.eng.State() == machine.Idle || a.eng.State() == machine.Reported) {
		if ok := a.heartbeatAtOnce(ctx, resp, rec, containers); ok {
			return nil
		}
	}
	if err := a.startFlight(resp, "", checkinDetail(resp, rec.AppliedSha)); err != nil {
		return err
	}
	started := a.Now()
	rep := effects.Report{Sha: rec.AppliedSha, Containers: containers}
	if len(bad) == 0 {
		rep.Result = effects.ResultApplied
		detail := healthyDetail(containers)
		if err := a.eng.Fire(machine.Outcome{Event: machine.EvHealthy, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
			return a.enqueue(r, tx, machine.Healthy, rep)
		}}, started); err != nil {
			return err
		}
		return a.flushOutbox(ctx)
	}
	rep.Result = effects.ResultFailed
	rep.Detail = "UNHEALTHY: " + strings.Join(bad, ", ")
	rep.LogTail = a.logTail(ctx)
	if err := a.eng.Fire(machine.Outcome{Event: machine.EvFail, Code: "UNHEALTHY", Detail: rep.Detail, Update: func(r *store.Record, tx store.Tx) error {
		return a.enqueue(r, tx, machine.Failed, rep)
	}}, started); err != nil {
		return err
	}
	if err := a.flushOutbox(ctx); err != nil {
		return err
	}
	return &effects.Error{Op: "heartbeat", Kind: effects.Permanent, Code: "UNHEALTHY", Msg: rep.Detail}
}

func healthyDetail(cs []effects.Container) string {
	return fmt.Sprintf("%d/%d services healthy", len(cs), len(cs))
}

// heartbeatAtOnce is the heartbeat of a converged box (at rest, every container healthy,
// nothing in the outbox): its report is sent first, and its transitions (checked in, healthy,
// reported) are written afterwards with the tick's end, in one transaction (Agent.tail). A
// tick that dies before that commit has changed nothing on disk: the next tick is simply this
// heartbeat again, and tenancy takes the same report twice. It returns false, having written
// and sent nothing that counts, when the report was not acknowledged: the caller then takes
// the outbox's way, which keeps the report until tenancy has it.
func (a *Agent) heartbeatAtOnce(ctx context.Context, resp effects.CheckinResponse, rec store.Record, containers []effects.Container) bool {
	started := a.Now()
	rep := a.outgoing(effects.Report{Sha: rec.AppliedSha, Result: effects.ResultApplied, Containers: containers})
	if err := a.Fx.Tenancy.Report(ctx, a.token, rep); err != nil {
		a.Log.Warn().Msg("report not acknowledged; it goes to the outbox: " + redact.String(err.Error()))
		return false
	}
	phase.Mark("report")
	a.tail = func() error {
		if err := a.startFlight(resp, "", checkinDetail(resp, rec.AppliedSha)); err != nil {
			return err
		}
		if err := a.eng.Fire(machine.Outcome{Event: machine.EvHealthy, Detail: healthyDetail(containers), Update: func(r *store.Record, _ store.Tx) error {
			r.LastReport = &store.LastReport{Result: rep.Result, Sha: rep.Sha, Detail: rep.Detail, At: started, Acknowledged: true}
			return nil
		}}, started); err != nil {
			return err
		}
		detail := "report " + rep.Result
		if rep.Sha != "" {
			detail += " for " + short(rep.Sha)
		}
		return a.eng.Fire(machine.Outcome{Event: machine.EvReport, Detail: detail + " acknowledged"}, started)
	}
	return true
}

// unhealthy names every container that is not running and healthy, sorted.
func unhealthy(cs []effects.Container) []string {
	var bad []string
	for _, c := range cs {
		if !c.Healthy() {
			name := c.Service
			if name == "" {
				name = c.Name
			}
			state := c.State
			if c.Health != "" {
				state += "/" + c.Health
			}
			bad = append(bad, fmt.Sprintf("%s (%s)", name, state))
		}
	}
	sort.Strings(bad)
	return bad
}

// logTail is the redacted tail of the project's logs for a failed report.
func (a *Agent) logTail(ctx context.Context) string {
	dir := a.currentDir()
	out, err := a.Fx.Compose.Logs(ctx, dir, 50)
	if err != nil {
		return "compose logs: " + redact.String(err.Error())
	}
	return tail(sanitize.Text(redact.String(out)), maxLogTail)
}

// retire is action down: compose down (volumes only when asked and never on prod), report down.
func (a *Agent) retire(ctx context.Context, resp effects.CheckinResponse) error {
	rec := a.eng.Record()
	st := a.eng.State()
	if st == machine.Down {
		// the down is done; its report waits in the outbox (sent above, or next tick)
		return nil
	}
	if rec.Action == effects.ActionDown && (st == machine.Reported || st == machine.Idle) {
		return a.eng.Note(machine.NoteCheckin, "", "action=down: retired; nothing runs", a.Now(), nil)
	}
	volumes := resp.PurgeVolumes || a.Cfg.VolumesOnAbsent == "purge"
	detail := checkinDetail(resp, rec.AppliedSha) + fmt.Sprintf(" purge_volumes=%t", resp.PurgeVolumes)
	if err := a.startFlight(resp, "", detail); err != nil {
		return err
	}
	started := a.Now()
	a.stepStarted = started
	note := "compose down --remove-orphans"
	if volumes && a.Cfg.IsProd() {
		volumes = false
		note += "; volumes kept: prod never purges"
	} else if volumes {
		note += " -v (volumes purged)"
	}
	if err := a.Fx.Compose.Down(ctx, a.currentDir(), volumes); err != nil {
		if effects.IsTemporary(err) {
			return err
		}
		return a.fail(ctx, machine.CheckedIn, effects.CodeOf(err), "compose down: "+err.Error(), false)
	}
	_ = removeCurrent(a.fs(), a.currentDir())
	rep := effects.Report{Sha: rec.AppliedSha, Result: effects.ResultDown, Detail: note}
	if err := a.eng.Fire(machine.Outcome{Event: machine.EvDown, Detail: note, Update: func(r *store.Record, tx store.Tx) error {
		r.AppliedSha = ""
		r.Containers = nil
		r.RetiredAt = a.Now()
		return a.enqueue(r, tx, machine.Down, rep)
	}}, started); err != nil {
		return err
	}
	return a.flushOutbox(ctx)
}
