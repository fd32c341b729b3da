package states

import (
	"context"
	"errors"
	"net/http"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine"
)

// withBearer makes one call that carries the token under PROTOCOL.md §1's rows for 401 and
// 403, which hold for every call (check-in, bundle, lease, report): a 401 drops the token and,
// when a fresh bootstrap grant is on disk, logs in with it and makes the call once more in the
// same tick (a second 401 blocks); without a grant the machine blocks (exit 1). A 403
// AGENT_ENV_MISMATCH blocks with exit 78, and later ticks touch no network until the config
// changes or `resume`. call must read tk.token when it runs (the token may change in between).
func (tk *tick) withBearer(ctx context.Context, call func() error) error {
	started := tk.Now()
	err := call()
	if err != nil && effects.KindOf(err) == effects.Unauthenticated {
		if rerr := tk.reauthenticate(ctx, err); rerr != nil {
			return rerr
		}
		err = call()
		if err != nil && effects.KindOf(err) == effects.Unauthenticated {
			return tk.blockUnauthenticated(err, "the fresh bootstrap grant's token was refused too")
		}
	}
	if err != nil && effects.KindOf(err) == effects.EnvMismatch {
		return tk.block(codeEnvMismatch, envMismatchWords(tk.Cfg.EnvID, tk.eng.Record().Token.EnvID, err), started, err)
	}
	return err
}

// isBlocked reports whether a call just blocked the machine: the step's error then ends the
// tick as it is (no failure, no refusal is fired from Blocked).
func (tk *tick) isBlocked() bool { return tk.eng.State() == machine.Blocked }

// readKV reads one secret. OpenBao answers 403 (permission denied) both for a path the policy
// does not grant and for a token it no longer honours (PROTOCOL.md §3); the manifest's paths
// were checked against the env's prefix before the lease, so a 403 is checked with lookup-self:
// a refused token is dropped like a refused bearer (a fresh grant on disk logs in and the read
// is made again, else Blocked) instead of failing the apply with the dead token kept.
func (tk *tick) readKV(ctx context.Context, path, key string, version int) (string, error) {
	v, err := tk.Fx.Bao.ReadKV(ctx, tk.token, path, key, version)
	var e *effects.Error
	if err == nil || !errors.As(err, &e) || e.Status != http.StatusForbidden {
		return v, err
	}
	if _, lerr := tk.Fx.Bao.LookupSelf(ctx, tk.token); lerr == nil || effects.IsTemporary(lerr) {
		return v, err // the token is fine: the path is refused
	} else if rerr := tk.reauthenticate(ctx, lerr); rerr != nil {
		return "", rerr
	}
	return tk.Fx.Bao.ReadKV(ctx, tk.token, path, key, version)
}
