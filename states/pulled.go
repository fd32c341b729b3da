package states

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// stepPull: Staged → Pulled | Failed. A failure carries the registry's own words.
//
// Idempotent: pulling twice pulls nothing new.
func (a *Agent) stepPull(ctx context.Context) error {
	started := a.Now()
	if err := a.Fx.Compose.Pull(ctx, a.currentDir()); err != nil {
		return a.composeFailed(ctx, machine.Staged, "COMPOSE_PULL_FAILED", "compose pull", err)
	}
	return a.eng.Fire(machine.Outcome{Event: machine.EvPull, Detail: "compose pull: images present"}, started)
}

// stepUp: Pulled → Up | Failed.
//
// Idempotent: `up -d --remove-orphans` of a running project changes nothing.
func (a *Agent) stepUp(ctx context.Context) error {
	started := a.Now()
	if err := a.Fx.Compose.Up(ctx, a.currentDir()); err != nil {
		return a.composeFailed(ctx, machine.Pulled, "COMPOSE_UP_FAILED", "compose up", err)
	}
	return a.eng.Fire(machine.Outcome{Event: machine.EvUp, Detail: "compose up -d --remove-orphans"}, started)
}

func (a *Agent) composeFailed(ctx context.Context, from machine.State, fallback, op string, err error) error {
	if effects.IsTemporary(err) {
		return err
	}
	// redacted first, then its control characters escaped: a secret is recognised as it is
	msg := sanitize.Line(redact.String(err.Error()))
	var e *effects.Error
	if errors.As(err, &e) && e.Msg != "" {
		msg = op + ": " + sanitize.Line(redact.String(e.Msg))
	}
	return a.fail(ctx, from, codeOr(err, fallback), msg, op != "compose pull")
}

// stepHealthy: Up → Healthy | Failed. Wait up to healthy_timeout_s for every service to run
// healthy, logging progress; then the applied sha is recorded and the report queued.
func (a *Agent) stepHealthy(ctx context.Context) error {
	started := a.Now()
	deadline := started.Add(time.Duration(a.Cfg.HealthyTimeoutS) * time.Second)
	lastLog := started
	for {
		cs, err := a.Fx.Compose.PS(ctx, a.currentDir())
		if err != nil && effects.IsTemporary(err) {
			return err
		}
		bad := unhealthy(cs)
		if err == nil && len(cs) > 0 && len(bad) == 0 {
			return a.healthy(ctx, cs, started)
		}
		now := a.Now()
		if !now.Before(deadline) {
			why := strings.Join(bad, ", ")
			if err != nil {
				why = "compose ps: " + redact.String(err.Error())
			} else if len(cs) == 0 {
				why = "no containers running"
			}
			return a.fail(ctx, machine.Up, "UNHEALTHY", fmt.Sprintf("not healthy after %ds: %s", a.Cfg.HealthyTimeoutS, why), true)
		}
		if now.Sub(lastLog) >= 10*time.Second {
			lastLog = now
			a.Log.Debug().Msgf("waiting for healthy: %d/%d services healthy (%s); %ds left", len(cs)-len(bad), len(cs), strings.Join(bad, ", "), int(deadline.Sub(now).Seconds()))
		}
		if a.stopping() {
			return errStopped{}
		}
		if err := a.Sleep(ctx, a.HealthPoll); err != nil {
			return &effects.Error{Op: "health wait", Kind: effects.Temporary, Err: err}
		}
	}
}

// healthy records the apply: applied sha, history, counters cleared, report queued.
func (a *Agent) healthy(ctx context.Context, cs []effects.Container, started time.Time) error {
	rec := a.eng.Record()
	now := a.Now()
	rep := effects.Report{Sha: rec.Sha, Result: effects.ResultApplied, Containers: cs}
	detail := fmt.Sprintf("applied %s: %d/%d services healthy", short(rec.Sha), len(cs), len(cs))
	if err := a.eng.Fire(machine.Outcome{Event: machine.EvHealthy, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
		r.AppliedSha = r.Sha
		r.Attempts, r.NextRetryAt, r.Parked, r.Failure, r.Refusal = nil, timeZero, false, nil, nil
		r.Containers = toStore(cs)
		if err := tx.AddApplied(store.Applied{Sha: r.Sha, At: now}); err != nil {
			return err
		}
		return a.enqueue(r, tx, machine.Healthy, rep)
	}}, started); err != nil {
		return err
	}
	a.Log.Info().Msg("applied " + short(rec.Sha))
	return a.flushOutbox(ctx)
}
