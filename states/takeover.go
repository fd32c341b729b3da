package states

import (
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/states/takeover"
	"github.com/tikali/monky-deployd/store"
)

// fresh reports whether the state file has never recorded anything a takeover could clobber:
// no tick, no applied sha, no applied history (a new state.db, or one moved aside as corrupt).
func (tk *tick) fresh() bool {
	rec := tk.eng.Record()
	if rec.Tick != 0 || rec.AppliedSha != "" {
		return false
	}
	empty := true
	_ = tk.Store.View(func(tx store.Tx) error {
		h, err := tx.AppliedHistory()
		empty = err == nil && len(h) == 0
		return nil
	})
	return empty
}

// takeover imports, into a state file that has never ticked, what a 0.1.x agent left on the
// box (states/takeover). Nothing on disk is changed. The journal's first entry lists what was
// imported and what was found unusable; a box with nothing to import gets no entry.
func (tk *tick) takeover() error {
	started := tk.Now()
	box := takeover.Read(tk.Cfg.StateDir, tk.Cfg.DeployDir, tk.currentDir(), func() (string, error) {
		return readSecretFile(tk.Cfg.TokenPath())
	})
	p := takeover.Decide(box, tk.eng.Record().Token.Present, takeover.MovedAside(tk.Store))
	if !p.Say {
		return nil
	}
	return tk.eng.Note(machine.NoteTakeover, "", "", p.Detail, started, p.Update)
}
