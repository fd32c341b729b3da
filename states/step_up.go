package states

import (
	"context"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
)

// stepUp: Pulled → Up | Failed.
//
// Idempotent: `up -d --remove-orphans` of a running project changes nothing.
func (tk *tick) stepUp(ctx context.Context) error {
	started := tk.Now()
	if err := tk.Fx.Compose.Up(ctx, tk.currentDir()); err != nil {
		return tk.composeFailed(ctx, machine.Pulled, vocab.ComposeUpFailed, "compose up", err)
	}
	return tk.eng.Fire(machine.Outcome{Event: machine.EvUp, Detail: "compose up -d --remove-orphans"}, started)
}
