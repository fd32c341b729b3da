package states

import (
	"context"
	"path/filepath"
	"time"

	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/states/releases"
	"github.com/tikali/monky-deployd/store"
)

// prune runs after every successful apply (states/releases): the release directories beyond
// keep_releases go, never the one `current` points at, the one in flight or the desired one, and
// the images only they named; with Prune (`run --prune`) every image of the env's repositories
// no kept release names goes too, then dangling ones. The journal says
// what was removed; a failure is logged and journaled, never the apply's failure.
func (tk *tick) prune(ctx context.Context) {
	started := tk.Now()
	rec := tk.eng.Record()
	protected := map[string]bool{}
	if cur, err := tk.fs().Readlink(tk.currentDir()); err == nil {
		protected[filepath.Base(cur)] = true
	}
	for _, s := range []string{rec.Sha, rec.DesiredSha, rec.AppliedSha} {
		if s != "" {
			protected[s] = true
		}
	}
	applied := map[string]time.Time{}
	_ = tk.Store.View(func(tx store.Tx) error {
		h, err := tx.AppliedHistory()
		for _, x := range h {
			if x.At.After(applied[x.Sha]) {
				applied[x.Sha] = x.At
			}
		}
		return err
	})
	p := releases.Pruner{FS: tk.fs(), DeployDir: tk.Cfg.DeployDir, Keep: tk.Cfg.KeepReleases, Project: tk.Cfg.ComposeProject}
	if tk.Prune {
		p.Compose = tk.Fx.Compose
	} else if s, ok := tk.Fx.Compose.(releases.ImageStore); ok {
		p.Store = s // the images only the releases removed here named go with them
	}
	detail, err := p.Prune(ctx, protected, applied)
	if err != nil {
		tk.Log.Warn().Msg("prune: " + err.Error())
		return
	}
	if detail == "" {
		return
	}
	tk.Log.Info().Msg("prune: " + detail)
	if err := tk.eng.Note(machine.NotePrune, "", "", detail, started, nil); err != nil {
		tk.Log.Warn().Msg("prune: " + err.Error())
	}
}
