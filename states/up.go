package states

import (
	"context"

	"github.com/tikali/monky-deployd/machine"
)

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
