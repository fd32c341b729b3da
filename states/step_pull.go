package states

import (
	"context"
	"errors"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
)

// stepPull: Staged → Pulled | Failed. A failure carries the registry's own words.
//
// Idempotent: pulling twice pulls nothing new.
func (tk *tick) stepPull(ctx context.Context) error {
	started := tk.Now()
	if err := tk.Fx.Compose.Pull(ctx, tk.currentDir()); err != nil {
		return tk.composeFailed(ctx, machine.Staged, vocab.ComposePullFailed, "compose pull", err)
	}
	return tk.eng.Fire(machine.Outcome{Event: machine.EvPull, Detail: "compose pull: images present"}, started)
}

func (tk *tick) composeFailed(ctx context.Context, from machine.State, fallback vocab.Code, op string, err error) error {
	if effects.IsTemporary(err) {
		return err
	}
	// redacted first, then its control characters escaped: a secret is recognised as it is
	msg := sanitize.Line(err.Error())
	var e *effects.Error
	if errors.As(err, &e) && e.Msg != "" {
		msg = op + ": " + sanitize.Line(e.Msg)
	}
	return tk.failBecause(ctx, from, codeOr(err, fallback), effects.ReasonOf(err), msg, op != "compose pull")
}
