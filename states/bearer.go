package states

import (
	"context"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine"
)

// withBearer makes one call that carries the token under PROTOCOL.md §1's rows for 401 and
// 403, which hold for every call (check-in, bundle, lease, report): a 401 drops the token and,
// when a fresh bootstrap grant is on disk, logs in with it and makes the call once more in the
// same tick (a second 401 blocks); without a grant the machine blocks (exit 1). A 403
// AGENT_ENV_MISMATCH blocks with exit 78, and later ticks touch no network until the config
// changes or `resume`. call must read a.token when it runs (the token may change in between).
func (a *Agent) withBearer(ctx context.Context, call func() error) error {
	started := a.Now()
	err := call()
	if err != nil && effects.KindOf(err) == effects.Unauthenticated {
		if rerr := a.reauthenticate(ctx, err); rerr != nil {
			return rerr
		}
		err = call()
		if err != nil && effects.KindOf(err) == effects.Unauthenticated {
			return a.blockUnauthenticated(err, "the fresh bootstrap grant's token was refused too")
		}
	}
	if err != nil && effects.KindOf(err) == effects.EnvMismatch {
		return a.block(codeEnvMismatch, envMismatchWords(a.Cfg.EnvID, a.eng.Record().Token.EnvID, err), started, err)
	}
	return err
}

// isBlocked reports whether a call just blocked the machine: the step's error then ends the
// tick as it is (no failure, no refusal is fired from Blocked).
func (a *Agent) isBlocked() bool { return a.eng.State() == machine.Blocked }
