package states

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

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
		if effects.CodeOf(err) == vocab.ReleaseChanged {
			return tk.fail(ctx, machine.Up, vocab.ReleaseChanged, sanitize.Line(err.Error()), false)
		}
		bad := unhealthy(cs)
		if err == nil && len(cs) > 0 && len(bad) == 0 {
			return tk.healthy(ctx, cs, started)
		}
		now := tk.Now()
		if !now.Before(deadline) {
			why := strings.Join(bad, ", ")
			if err != nil {
				why = "compose ps: " + err.Error()
			} else if len(cs) == 0 {
				why = "no containers running"
			}
			return tk.fail(ctx, machine.Up, vocab.Unhealthy, fmt.Sprintf("not healthy after %ds: %s", tk.Cfg.HealthyTimeoutS, why), true)
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
