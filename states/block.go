package states

import (
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/states/credential"
	"github.com/tikali/monky-deployd/store"
)

func (tk *tick) blockUnauthenticated(cause error, reason vocab.Reason, detail string) error {
	if cause != nil && effects.KindOf(cause) == effects.Unauthenticated {
		detail = "bearer refused: " + detail
	}
	return tk.block(credential.BlockCode(reason), reason, detail, tk.Now(), cause)
}

// block parks the machine in Blocked: later ticks touch no network until resume, a changed
// config, or (for a refused bearer) a new bootstrap grant on disk.
func (tk *tick) block(code vocab.Code, reason vocab.Reason, detail string, started time.Time, cause error) error {
	kind := effects.Permanent
	if code == codeEnvMismatch {
		kind = effects.EnvMismatch
	}
	b := &store.Block{Code: code, Reason: reason, Detail: detail, At: tk.Now(), ConfigHash: tk.Cfg.Hash, GrantStamp: files.Stamp(tk.Cfg.BootstrapPath)}
	if tk.eng.State() != machine.Blocked {
		if err := tk.eng.Fire(machine.Outcome{Event: machine.EvBlock, Code: code, Reason: reason, Detail: detail, Update: func(r *store.Record, _ store.Tx) error {
			r.Block = b
			return nil
		}}, started); err != nil {
			return err
		}
	}
	return &effects.Error{Op: "blocked", Kind: kind, Code: code, Reason: reason, Msg: detail, Err: cause}
}

// checkBlock clears a block whose cause went away, or ends the tick at once, off the network.
func (tk *tick) checkBlock() error {
	rec := tk.eng.Record()
	b := rec.Block
	if b == nil {
		b = &store.Block{Code: codeUnauthenticated}
	}
	reason := ""
	switch {
	case tk.Cfg.Hash != "" && tk.Cfg.Hash != b.ConfigHash:
		reason = "config.yaml changed"
	case b.Code != codeEnvMismatch && files.Stamp(tk.Cfg.BootstrapPath) != "" && files.Stamp(tk.Cfg.BootstrapPath) != b.GrantStamp:
		reason = "a new bootstrap grant is on disk"
	}
	if reason != "" {
		return tk.eng.Fire(machine.Outcome{Event: machine.EvUnblock, Detail: "unblocked: " + reason, Update: func(r *store.Record, _ store.Tx) error {
			r.Block = nil
			return nil
		}}, tk.Now())
	}
	kind := effects.Permanent
	if b.Code == codeEnvMismatch {
		kind = effects.EnvMismatch
	}
	msg := b.Detail + " — blocked since " + machine.Stamp(b.At) + "; no network until `" + tk.agentCommand("resume") + "`, a changed config"
	if b.Code != codeEnvMismatch {
		msg += " or a new bootstrap.jwt"
	}
	_ = tk.eng.Note(machine.NoteBlocked, b.Code, b.Reason, "still blocked: "+b.Detail, tk.Now(), nil)
	return &effects.Error{Op: "blocked", Kind: kind, Code: b.Code, Reason: b.Reason, Msg: msg}
}

// isBlocked reports whether a call just blocked the machine: the step's error then ends the
// tick as it is (no failure, no refusal is fired from Blocked).
func (tk *tick) isBlocked() bool { return tk.eng.State() == machine.Blocked }
