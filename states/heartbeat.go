package states

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/internal/phase"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// heartbeat is action none: the box runs what tenancy wants; report its health.
func (tk *tick) heartbeat(ctx context.Context, resp effects.CheckinResponse, containers []effects.Container) error {
	rec := tk.eng.Record()
	if rec.AppliedSha == "" && resp.DesiredSha == "" && tk.eng.State().Rest() {
		return tk.eng.Note(machine.NoteCheckin, "", "action=none: nothing is deployed yet and tenancy wants nothing", tk.Now(), nil)
	}
	bad := unhealthy(containers)
	if len(containers) == 0 {
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
	rep.Result = effects.ResultFailed
	rep.Detail = "UNHEALTHY: " + strings.Join(bad, ", ")
	rep.LogTail = tk.logTail(ctx)
	if err := tk.eng.Fire(machine.Outcome{Event: machine.EvFail, Code: "UNHEALTHY", Detail: rep.Detail, Update: func(r *store.Record, tx store.Tx) error {
		return tk.enqueue(r, tx, machine.Failed, rep)
	}}, started); err != nil {
		return err
	}
	if err := tk.flushOutbox(ctx); err != nil {
		return err
	}
	return &effects.Error{Op: "heartbeat", Kind: effects.Permanent, Code: "UNHEALTHY", Msg: rep.Detail}
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
		tk.Log.Debug().Msg("report not acknowledged; it goes to the outbox: " + redact.String(err.Error()))
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
func (tk *tick) logTail(ctx context.Context) string {
	dir := tk.currentDir()
	out, err := tk.Fx.Compose.Logs(ctx, dir, 50)
	if err != nil {
		return "compose logs: " + redact.String(err.Error())
	}
	return tail(sanitize.Text(redact.String(out)), maxLogTail)
}

// stepHealthy: Up → Healthy | Failed. Wait up to healthy_timeout_s for every service to run
// healthy, logging progress; then the applied sha is recorded and the report queued.
func (tk *tick) stepHealthy(ctx context.Context) error {
	started := tk.Now()
	deadline := started.Add(time.Duration(tk.Cfg.HealthyTimeoutS) * time.Second)
	lastLog := started
	for {
		cs, err := tk.Fx.Compose.PS(ctx, tk.currentDir())
		if err != nil && effects.IsTemporary(err) {
			return err
		}
		if effects.CodeOf(err) == docker.CodeReleaseChanged {
			return tk.fail(ctx, machine.Up, docker.CodeReleaseChanged, sanitize.Line(redact.String(err.Error())), false)
		}
		bad := unhealthy(cs)
		if err == nil && len(cs) > 0 && len(bad) == 0 {
			return tk.healthy(ctx, cs, started)
		}
		now := tk.Now()
		if !now.Before(deadline) {
			why := strings.Join(bad, ", ")
			if err != nil {
				why = "compose ps: " + redact.String(err.Error())
			} else if len(cs) == 0 {
				why = "no containers running"
			}
			return tk.fail(ctx, machine.Up, "UNHEALTHY", fmt.Sprintf("not healthy after %ds: %s", tk.Cfg.HealthyTimeoutS, why), true)
		}
		if now.Sub(lastLog) >= 10*time.Second {
			lastLog = now
			tk.Log.Debug().Msgf("waiting for healthy: %d/%d services healthy (%s); %ds left", len(cs)-len(bad), len(cs), strings.Join(bad, ", "), int(deadline.Sub(now).Seconds()))
		}
		if tk.stopping() {
			return errStopped{}
		}
		if err := tk.Sleep(ctx, tk.HealthPoll); err != nil {
			return &effects.Error{Op: "health wait", Kind: effects.Temporary, Err: err}
		}
	}
}

// healthy records the apply: applied sha, history, counters cleared, report queued.
func (tk *tick) healthy(ctx context.Context, cs []effects.Container, started time.Time) error {
	rec := tk.eng.Record()
	now := tk.Now()
	rep := effects.Report{Sha: rec.Sha, Result: effects.ResultApplied, Containers: cs}
	detail := fmt.Sprintf("applied %s: %d/%d services healthy", machine.ShortSha(rec.Sha), len(cs), len(cs))
	if err := tk.eng.Fire(machine.Outcome{Event: machine.EvHealthy, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
		r.AppliedSha = r.Sha
		r.Attempts, r.NextRetryAt, r.Parked, r.Failure, r.Refusal = nil, timeZero, false, nil, nil
		r.Containers = toStore(cs)
		if err := tx.AddApplied(store.Applied{Sha: r.Sha, At: now}); err != nil {
			return err
		}
		return tk.enqueue(r, tx, machine.Healthy, rep)
	}}, started); err != nil {
		return err
	}
	tk.dropKeptBundle(rec.Sha)
	tk.Log.Debug().Msg("applied " + machine.ShortSha(rec.Sha)) // the transition to Healthy says it
	return tk.flushOutbox(ctx)
}
