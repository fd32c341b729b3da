package states

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/failpoint"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// Protocol codes the tick itself decides on.
const (
	codeEnvMismatch     = machine.CodeEnvMismatch
	codeUnauthenticated = machine.CodeUnauthenticated
)

// Token sources.
const (
	SourceBootstrap = "bootstrap"
	SourceLease     = "lease"
)

// untrusted reports whether err is a file the agent refuses to trust: the tick ends with exit 1
// naming the fix, and nothing is blocked (fixing the file is enough).
func untrusted(err error) bool {
	var te *files.TrustError
	return errors.As(err, &te)
}

// maxTokenBytes bounds a token or grant the agent stores (OpenBao's tokens are under 200
// bytes, a grant JWT under 2 KiB).
const maxTokenBytes = 8192

// checkCredential refuses a token or grant that is not 1 to maxTokenBytes printable ASCII
// characters without spaces: such a value breaks every later request's header (a CR/LF in a
// token answer made every tick exit 1). The value itself is never in the error.
func checkCredential(op, what, v string) error {
	msg := ""
	switch {
	case v == "":
		msg = what + " is empty"
	case len(v) > maxTokenBytes:
		msg = fmt.Sprintf("%s is %d bytes, more than %d", what, len(v), maxTokenBytes)
	default:
		for i := 0; i < len(v); i++ {
			if v[i] < 0x21 || v[i] > 0x7e {
				msg = fmt.Sprintf("%s holds a byte that is not printable ASCII (%#02x at offset %d)", what, v[i], i)
				break
			}
		}
	}
	if msg == "" {
		return nil
	}
	return &effects.Error{Op: op, Kind: effects.Permanent, Code: "CREDENTIAL_SHAPE", Msg: msg + ": not stored"}
}

// readSecretFile reads a 0600 file holding one secret; "" when absent or empty. The file must
// be one the agent trusts (files.ReadTrusted): a symlink, a foreign owner or a group- or
// world-writable mode is an error naming the fix, and nothing is read from it. The value is
// registered with the redactor before it is returned.
func readSecretFile(path string) (string, error) {
	b, err := files.ReadTrusted(path, maxTokenBytes+64)
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
	if err != nil {
		return err
	}
	if tok != "" {
		if err := checkCredential("token", tk.Cfg.TokenPath(), tok); err != nil {
			// written by an older agent: unusable in a header, so dropped like a refused one
			return tk.reauthenticate(ctx, err)
		}
		tk.token = tok
		return tk.upkeep(ctx)
	}
	grant, err := readSecretFile(tk.Cfg.BootstrapPath)
	if untrusted(err) {
		return err
	}
	if err != nil {
		return tk.blockUnauthenticated(err, fmt.Sprintf("no token and the bootstrap grant at %s is unreadable: %v", tk.Cfg.BootstrapPath, err))
	}
	if grant == "" {
		return tk.blockUnauthenticated(nil, fmt.Sprintf("no token at %s and no bootstrap grant at %s — re-run the install kit", tk.Cfg.TokenPath(), tk.Cfg.BootstrapPath))
	}
	return tk.bootstrap(ctx, grant)
}

// bootstrap logs in with the kit's bootstrap grant, stores the token (0600) and consumes the
// grant: deleted, or truncated when its directory is read-only.
func (tk *tick) bootstrap(ctx context.Context, grant string) error {
	started := tk.Now()
	redact.Add(grant)
	t, err := tk.Fx.Bao.Login(ctx, tk.Cfg.Bao.AuthMount, tk.Cfg.Bao.Role, grant)
	if err != nil {
		if effects.IsTemporary(err) {
			tk.noteStop(machine.NoteBootstrapFailed, err, started, "")
			return err
		}
		return tk.blockUnauthenticated(err, "the bootstrap grant was refused by OpenBao ("+redact.String(err.Error())+") — re-run the install kit for a fresh grant")
	}
	redact.Add(t.Value)
	if err := checkCredential("bao login", "the token in OpenBao's answer", t.Value); err != nil {
		_ = tk.eng.Note(machine.NoteBootstrapFailed, effects.CodeOf(err), err.Error()+"; the grant is kept for the next tick", started, nil)
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
	meta := store.TokenMeta{Present: true, Source: SourceBootstrap, ExpiresAt: now.Add(t.TTL), CheckedAt: now, GrantJTI: t.Meta["grant_jti"], EnvID: t.Meta["env_id"]}
	return tk.eng.Note(machine.NoteBootstrap, "", fmt.Sprintf("logged in with the bootstrap grant; token stored (ttl %s); %s", t.TTL.Round(time.Second), consumed), started,
		func(r *store.Record, _ store.Tx) error { r.Token = meta; return nil })
}

// wholeToken accepts a token file as WriteAtomicFS wrote it: one line of printable ASCII
// ended by its newline. A torn write (no newline, or cut short by a power loss) is refused.
func wholeToken(b []byte) bool {
	if len(b) < 2 || len(b) > 16<<10 || b[len(b)-1] != '\n' {
		return false
	}
	for _, c := range b[:len(b)-1] {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// wholeGrant accepts a kept grant file: a whole line holding a JWT whose claims decode.
func wholeGrant(b []byte) bool {
	var claims map[string]any
	return wholeToken(b) && jwtClaims(string(b), &claims)
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
	return "the grant could NOT be consumed (" + redact.String(err.Error()) + "): it stays at " + path
}

// expiryUnknown: the token's expiry must be learnt from OpenBao (lookup-self) before use.
func (tk *tick) expiryUnknown(rec store.Record) bool {
	return rec.Token.ExpiresAt.IsZero() || !rec.Token.Present || tk.tokenRecovered
}

// upkeep renews the token when its ttl falls under renew_below_s, learning the expiry with
// lookup-self when it is not known. A token OpenBao no longer honours is dropped.
func (tk *tick) upkeep(ctx context.Context) error {
	rec := tk.eng.Record()
	now := tk.Now()
	below := time.Duration(tk.Cfg.Bao.RenewBelow) * time.Second
	if tk.expiryUnknown(rec) {
		info, err := tk.Fx.Bao.LookupSelf(ctx, tk.token)
		if err != nil {
			return tk.tokenUnusable(ctx, err)
		}
		// A kill between the bootstrap login's token write and the grant's consumption leaves
		// the grant on disk: the token's grant_jti says it was used.
		fromGrant := false
		if g, _ := readSecretFile(tk.Cfg.BootstrapPath); g != "" && info.GrantJTI != "" && grantJTI(g) == info.GrantJTI {
			consumeGrant(tk.fs(), tk.Cfg.BootstrapPath)
			fromGrant = true
		}
		if err := tk.eng.Save(func(r *store.Record, _ store.Tx) error {
			r.Token.Present = true
			if r.Token.Source == "" || fromGrant {
				r.Token.Source = SourceBootstrap
			}
			r.Token.ExpiresAt = now.Add(info.TTL)
			r.Token.CheckedAt = now
			r.Token.EnvID, r.Token.GrantJTI = info.EnvID, info.GrantJTI
			return nil
		}); err != nil {
			return err
		}
		rec = tk.eng.Record()
	}
	if rec.Token.ExpiresAt.Sub(now) >= below {
		return nil
	}
	started := now
	ttl, err := tk.Fx.Bao.RenewSelf(ctx, tk.token, 24*time.Hour)
	if err != nil {
		return tk.tokenUnusable(ctx, err)
	}
	if err := tk.eng.Note(machine.NoteRenew, "", fmt.Sprintf("token renewed: ttl %s", ttl.Round(time.Second)), started, func(r *store.Record, _ store.Tx) error {
		r.Token.ExpiresAt = tk.Now().Add(ttl)
		r.Token.CheckedAt = tk.Now()
		return nil
	}); err != nil {
		return err
	}
	if ttl >= below {
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
	code, detail := codeUnauthenticated, "bearer refused by tenancy ("+answerWords(cause)+"): token deleted"
	why := "the grant was superseded (kit re-revealed or env retired) or the token revoked, and no fresh bootstrap grant is on disk — re-run the install kit"
	if c := effects.CodeOf(cause); strings.HasPrefix(c, "BAO_") {
		// OpenBao's refusal is OpenBao's, not tenancy's 401
		code, detail = c, "OpenBao refused the token ("+answerWords(cause)+"): token deleted"
		why = "OpenBao refused the token (" + c + "), and no fresh bootstrap grant is on disk — re-run the install kit"
	}
	if err := tk.eng.Note(machine.NoteUnauthenticated, code, detail, started, func(r *store.Record, _ store.Tx) error {
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
		return tk.blockUnauthenticated(cause, why)
	}
	return tk.bootstrap(ctx, grant)
}

// answerWords is what the far side answered, once: the call, the HTTP status and its message,
// without the hint the error adds for a log line.
func answerWords(err error) string {
	var e *effects.Error
	if !errors.As(err, &e) || e.Msg == "" {
		return redact.String(err.Error())
	}
	w := e.Op
	if e.Status > 0 {
		w += fmt.Sprintf(" HTTP %d", e.Status)
	}
	return redact.String(w + ": " + e.Msg)
}
