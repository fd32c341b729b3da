package states

// The token half of the credential's act: the bearer a tick starts with, the kit's grant, the
// token's upkeep, a refused bearer dropped. What is decided is decided in states/credential
// (PlanStart, GrantLoginFailed, RenewDue, BearerOf, Dropped); this file acts.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/failpoint"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/states/credential"
	"github.com/tikali/monky-deployd/store"
)

// Protocol codes the tick itself decides on.
const (
	codeEnvMismatch     = vocab.AgentEnvMismatch
	codeUnauthenticated = vocab.AgentUnauthenticated
)

// untrusted reports whether err is a file the agent refuses to trust: the tick ends with exit 1
// naming the fix, and nothing is blocked (fixing the file is enough).
func untrusted(err error) bool {
	var te *files.TrustError
	return errors.As(err, &te)
}

// readSecretFile reads a 0600 file holding one secret; "" when absent or empty. The file must
// be one the agent trusts (files.ReadTrusted): a symlink, a foreign owner or a group- or
// world-writable mode is an error naming the fix, and nothing is read from it. The value is
// registered with the redactor before it is returned.
func readSecretFile(path string) (string, error) {
	b, err := files.ReadTrusted(path, credential.MaxBytes+64)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if untrusted(err) {
			return "", err
		}
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	v := string(bytes.TrimSpace(b))
	redact.Add(v)
	return v, nil
}

// ensureToken gives the tick a bearer: the stored token (renewed when its ttl runs low), or a
// login with the kit's bootstrap grant when there is none. A fresh bootstrap.jwt beside a
// working token is left alone: the token is used.
func (tk *tick) ensureToken(ctx context.Context) error {
	tok, err := readSecretFile(tk.Cfg.TokenPath())
	var te *files.TrustError
	switch {
	case errors.As(err, &te):
		// the record says so, with the tick's end: status reads the trust fact the evidence names
		why := te.Path + " " + te.Problem
		tk.eng.Defer(func(r *store.Record) { r.Token.Untrusted = why })
		return err
	case err != nil:
		return err
	case tk.eng.Record().Token.Untrusted != "":
		tk.eng.Defer(func(r *store.Record) { r.Token.Untrusted = "" })
	}
	var grant string
	var grantErr error
	if tok == "" {
		if grant, grantErr = readSecretFile(tk.Cfg.BootstrapPath); untrusted(grantErr) {
			return grantErr
		}
	}
	switch p := credential.PlanStart(tok, grant, grantErr, tk.Cfg.TokenPath(), tk.Cfg.BootstrapPath); {
	case p.Drop != nil:
		return tk.reauthenticate(ctx, p.Drop)
	case p.Block != nil:
		return tk.blocked(p.Block)
	case p.Use:
		tk.token = tok
		return tk.upkeep(ctx)
	}
	return tk.bootstrap(ctx, grant)
}

// blocked parks the machine on a credential plan's block.
func (tk *tick) blocked(b *credential.Blocked) error {
	return tk.blockUnauthenticated(b.Cause, b.Reason, b.Detail)
}

// bootstrap logs in with the kit's bootstrap grant, stores the token (0600) and consumes the
// grant: deleted, or truncated when its directory is read-only.
func (tk *tick) bootstrap(ctx context.Context, grant string) error {
	started := tk.Now()
	redact.Add(grant)
	t, err := tk.Fx.Bao.Login(ctx, tk.Cfg.Bao.AuthMount, tk.Cfg.Bao.Role, grant)
	if err != nil {
		if b := credential.GrantLoginFailed(err); b != nil {
			return tk.blocked(b)
		}
		tk.noteStop(machine.NoteBootstrapFailed, err, started, "")
		return err
	}
	redact.Add(t.Value)
	if err := credential.Check("bao login", "the token in OpenBao's answer", vocab.ReasonBaoAnswerShape, t.Value); err != nil {
		_ = tk.eng.Note(machine.NoteBootstrapFailed, effects.CodeOf(err), effects.ReasonOf(err), err.Error()+"; the grant is kept for the next tick", started, nil)
		return err
	}
	if err := files.WriteAtomicFS(tk.fs(), tk.Cfg.TokenPath(), []byte(t.Value+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:bootstrap-token-written")
	consumed := consumeGrant(tk.fs(), tk.Cfg.BootstrapPath)
	failpoint.Hit("file:bootstrap-grant-consumed")
	tk.token = t.Value
	now := tk.Now()
	meta := store.TokenMeta{Present: true, Source: store.SourceBootstrap, ExpiresAt: now.Add(t.TTL), CheckedAt: now, GrantJTI: t.Meta["grant_jti"], EnvID: t.Meta["env_id"]}
	return tk.eng.Note(machine.NoteBootstrap, "", "", fmt.Sprintf("logged in with the bootstrap grant; token stored (ttl %s); %s", t.TTL.Round(time.Second), consumed), started,
		func(r *store.Record, _ store.Tx) error { r.Token = meta; return nil })
}

// consumeGrant deletes a used grant, or empties it where the directory is not writable, and
// says which — or that neither worked.
func consumeGrant(fsys files.FS, path string) string {
	err := files.RemoveFS(fsys, path)
	if err == nil {
		return "grant consumed (deleted)"
	}
	if terr := os.Truncate(path, 0); terr == nil {
		return "grant consumed (emptied: its directory is not writable)"
	}
	return "the grant could NOT be consumed (" + err.Error() + "): it stays at " + path
}

// learnExpiry asks OpenBao who the token is (lookup-self) when the state file does not know
// its expiry, and records what it says.
func (tk *tick) learnExpiry(ctx context.Context, now time.Time) error {
	info, err := tk.Fx.Bao.LookupSelf(ctx, tk.token)
	if err != nil {
		return tk.tokenUnusable(ctx, err)
	}
	// A kill between the bootstrap login's token write and the grant's consumption leaves
	// the grant on disk: the token's grant_jti says it was used.
	fromGrant := false
	if g, _ := readSecretFile(tk.Cfg.BootstrapPath); g != "" && info.GrantJTI != "" && credential.GrantJTI(g) == info.GrantJTI {
		consumeGrant(tk.fs(), tk.Cfg.BootstrapPath)
		fromGrant = true
	}
	return tk.eng.Save(func(r *store.Record, _ store.Tx) error {
		r.Token.Present = true
		if r.Token.Source == "" || fromGrant {
			r.Token.Source = store.SourceBootstrap
		}
		r.Token.ExpiresAt = now.Add(info.TTL)
		r.Token.CheckedAt = now
		r.Token.EnvID, r.Token.GrantJTI = info.EnvID, info.GrantJTI
		return nil
	})
}

// upkeep renews the token when its ttl falls under renew_below_s, learning the expiry with
// lookup-self when it is not known. A token OpenBao no longer honours is dropped.
func (tk *tick) upkeep(ctx context.Context) error {
	rec := tk.eng.Record()
	now := tk.Now()
	below := time.Duration(tk.Cfg.Bao.RenewBelow) * time.Second
	if credential.Unknown(rec.Token, tk.tokenRecovered) {
		if err := tk.learnExpiry(ctx, now); err != nil {
			return err
		}
		rec = tk.eng.Record()
	}
	if !credential.RenewDue(rec.Token.ExpiresAt, now, below) {
		return nil
	}
	started := now
	ttl, err := tk.Fx.Bao.RenewSelf(ctx, tk.token, 24*time.Hour)
	if err != nil {
		return tk.tokenUnusable(ctx, err)
	}
	if err := tk.eng.Note(machine.NoteRenew, "", "", fmt.Sprintf("token renewed: ttl %s", ttl.Round(time.Second)), started, func(r *store.Record, _ store.Tx) error {
		r.Token.ExpiresAt = tk.Now().Add(ttl)
		r.Token.CheckedAt = tk.Now()
		return nil
	}); err != nil {
		return err
	}
	if !credential.SwapDue(ttl, below) {
		return nil
	}
	// The token is near its max ttl: only a new lease gives a new one. Without budget, the
	// next tick tries again; the token still works until it expires.
	if err := tk.leaseLogin(ctx, "renew"); err != nil && !effects.IsTemporary(err) {
		return err
	}
	return nil
}

// tokenUnusable handles a lookup or renew error: temporary errors pass through; a token
// OpenBao refuses is dropped like a refused bearer.
func (tk *tick) tokenUnusable(ctx context.Context, err error) error {
	if effects.IsTemporary(err) {
		return err
	}
	return tk.reauthenticate(ctx, err)
}

// reauthenticate drops a refused token; a fresh bootstrap grant on disk logs in again in the
// same tick, else the machine blocks until one arrives.
func (tk *tick) reauthenticate(ctx context.Context, cause error) error {
	started := tk.Now()
	if err := files.RemoveFS(tk.fs(), tk.Cfg.TokenPath()); err != nil {
		return err
	}
	tk.token = ""
	d := credential.Dropped(cause)
	if err := tk.eng.Note(machine.NoteUnauthenticated, d.Code, d.Reason, d.Detail, started, func(r *store.Record, _ store.Tx) error {
		r.Token = store.TokenMeta{}
		return nil
	}); err != nil {
		return err
	}
	grant, err := readSecretFile(tk.Cfg.BootstrapPath)
	if untrusted(err) {
		return err
	}
	if err != nil || grant == "" {
		return tk.blockUnauthenticated(cause, d.Reason, d.Block)
	}
	return tk.bootstrap(ctx, grant)
}

// withBearer makes one call that carries the token under PROTOCOL.md §1's rows for 401 and
// 403, which hold for every call (check-in, bundle, lease, report): a 401 drops the token and,
// when a fresh bootstrap grant is on disk, logs in with it and makes the call once more in the
// same tick (a second 401 blocks); without a grant the machine blocks (exit 1). A 403
// AGENT_ENV_MISMATCH blocks with exit 78, and later ticks touch no network until the config
// changes or `resume`. call must read tk.token when it runs (the token may change in between).
func (tk *tick) withBearer(ctx context.Context, call func() error) error {
	started := tk.Now()
	err := call()
	if credential.BearerOf(err) == credential.BearerRefused {
		if rerr := tk.reauthenticate(ctx, err); rerr != nil {
			return rerr
		}
		if err = call(); credential.BearerOf(err) == credential.BearerRefused {
			return tk.blocked(credential.RefusedAgain(err))
		}
	}
	if credential.BearerOf(err) == credential.BearerEnvMismatch {
		return tk.block(codeEnvMismatch, vocab.ReasonTenancy403, envMismatchWords(tk.Cfg.EnvID, tk.eng.Record().Token.EnvID, err), started, err)
	}
	return err
}

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
