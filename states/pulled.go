package states

import (
	"context"
	"errors"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/machine"
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
