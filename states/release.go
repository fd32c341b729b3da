package states

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// imageRemover is the part of the docker CLI that --prune needs beyond effects.Compose.
type imageRemover interface {
	Images(ctx context.Context) ([]string, error)
	RemoveImage(ctx context.Context, ref string) error
}

// prune runs after every successful apply. It removes the release directories beyond
// keep_releases, oldest first by when each was applied (the applied history in the state
// file; a directory never applied counts as the oldest). It never removes the release
// `current` points at, the one in flight, or the desired one. With Prune (`run --prune`) it
// also removes the images of the env's own repositories that no kept release names, then
// dangling images. The journal says what was removed; a failure is logged and journaled,
// never the apply's failure.
func (tk *tick) prune(ctx context.Context) {
	started := tk.Now()
	releases := filepath.Join(tk.Cfg.DeployDir, "releases")
	entries, err := tk.fs().ReadDir(releases)
	if err != nil {
		tk.Log.Warn().Msg("prune: " + redact.String(err.Error()))
		return
	}
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

	type rel struct {
		name string
		at   time.Time // applied; zero when never applied
		mod  time.Time
	}
	var kept, others []rel
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		r := rel{name: e.Name(), at: applied[e.Name()]}
		if info, err := e.Info(); err == nil {
			r.mod = info.ModTime()
		}
		if protected[e.Name()] {
			kept = append(kept, r)
			continue
		}
		others = append(others, r)
	}
	// newest first: by applied time, then by the directory's time
	sort.Slice(others, func(i, j int) bool {
		if !others[i].at.Equal(others[j].at) {
			return others[i].at.After(others[j].at)
		}
		if !others[i].mod.Equal(others[j].mod) {
			return others[i].mod.After(others[j].mod)
		}
		return others[i].name > others[j].name
	})
	slots := max(tk.Cfg.KeepReleases-len(kept), 0)
	var removed, failed []string
	for i, r := range others {
		if i < slots {
			kept = append(kept, r)
			continue
		}
		dir := filepath.Join(releases, r.name)
		if err := tk.fs().RemoveAll(dir); err != nil {
			failed = append(failed, machine.ShortSha(r.name)+": "+redact.String(err.Error()))
			continue
		}
		removed = append(removed, machine.ShortSha(r.name))
	}
	// a resolved model holds the secrets' values: it goes with its release (and one whose
	// release is gone, left by a kill between the two removals, goes now)
	models := filepath.Join(tk.Cfg.DeployDir, docker.ResolvedDirName)
	ms, _ := tk.fs().ReadDir(models)
	for _, m := range ms {
		sha, ok := strings.CutSuffix(m.Name(), ".yaml")
		if !ok || !bundle.ValidSha(sha) {
			continue
		}
		if _, err := tk.fs().Lstat(filepath.Join(releases, sha)); errors.Is(err, fs.ErrNotExist) {
			if err := tk.fs().Remove(filepath.Join(models, m.Name())); err != nil {
				failed = append(failed, "model "+machine.ShortSha(sha)+": "+redact.String(err.Error()))
			}
		}
	}
	var words []string
	if len(removed) > 0 {
		words = append(words, fmt.Sprintf("removed %d release(s) beyond keep_releases %d, oldest first: %s", len(removed), tk.Cfg.KeepReleases, strings.Join(removed, ", ")))
	}
	if len(failed) > 0 {
		words = append(words, "could not remove "+strings.Join(failed, "; "))
	}
	if tk.Prune {
		keptDirs := make([]string, len(kept))
		for i, r := range kept {
			keptDirs[i] = filepath.Join(releases, r.name)
		}
		words = append(words, tk.pruneImages(ctx, keptDirs))
	}
	if len(words) == 0 {
		return
	}
	detail := strings.Join(words, "; ")
	tk.Log.Info().Msg("prune: " + detail)
	if err := tk.eng.Note(machine.NotePrune, "", detail, started, nil); err != nil {
		tk.Log.Warn().Msg("prune: " + err.Error())
	}
}

// pruneImages removes the local images of the env's repositories (every repository a kept
// release names) that no kept release names, then dangling images; it says what it did.
// Images of other repositories (anything else the host runs) are never touched. A release
// whose compose file cannot be read, or names an image through a variable, stops the
// removal: an image it may use is not removed on a guess.
func (tk *tick) pruneImages(ctx context.Context, keptDirs []string) string {
	ir, ok := tk.Fx.Compose.(imageRemover)
	if !ok {
		return "images: this docker cannot list images; none removed"
	}
	keep := map[string]bool{}
	repos := map[string]bool{}
	for _, dir := range keptDirs {
		refs, err := releaseImages(dir)
		if err != nil {
			return "images: none removed (" + redact.String(err.Error()) + ")"
		}
		for _, r := range refs {
			keep[r] = true
			repos[repository(r)] = true
		}
	}
	have, err := ir.Images(ctx)
	if err != nil {
		return "images: none removed (" + redact.String(err.Error()) + ")"
	}
	var gone, left []string
	for _, ref := range have {
		if keep[ref] || keep[strings.TrimPrefix(ref, "docker.io/")] || !repos[repository(ref)] {
			continue
		}
		if err := ir.RemoveImage(ctx, ref); err != nil {
			left = append(left, ref)
			continue
		}
		gone = append(gone, ref)
	}
	msg := fmt.Sprintf("images: removed %d no kept release uses", len(gone))
	if len(gone) > 0 {
		msg += ": " + strings.Join(gone, ", ")
	}
	if len(left) > 0 {
		msg += fmt.Sprintf("; %d still in use or not removable: %s", len(left), strings.Join(left, ", "))
	}
	if err := tk.Fx.Compose.ImagePrune(ctx); err != nil {
		msg += "; docker image prune: " + redact.String(err.Error())
	} else {
		msg += "; dangling images pruned"
	}
	return msg
}

// releaseImages reads the images a release's compose file names (bundle.json's compose_file,
// default compose.yaml). An image given through a variable is an error: only compose could
// say what it resolves to.
func releaseImages(dir string) ([]string, error) {
	composeFile := "compose.yaml"
	if b, err := os.ReadFile(filepath.Join(dir, bundle.MetaFile)); err == nil {
		var m struct {
			ComposeFile string `json:"compose_file"`
		}
		if yaml.Unmarshal(b, &m) == nil && m.ComposeFile != "" {
			composeFile = m.ComposeFile
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.Clean("/" + composeFile)[1:]))
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", machine.ShortSha(filepath.Base(dir)), err)
	}
	var doc struct {
		Services map[string]struct {
			Image string `yaml:"image"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("release %s: %s: %w", machine.ShortSha(filepath.Base(dir)), composeFile, err)
	}
	var out []string
	for name, s := range doc.Services {
		if strings.Contains(s.Image, "$") {
			return nil, fmt.Errorf("release %s: service %s names its image through a variable", machine.ShortSha(filepath.Base(dir)), name)
		}
		if s.Image != "" {
			out = append(out, normalImage(s.Image))
		}
	}
	return out, nil
}

// normalImage adds the tag docker assumes when none is given.
func normalImage(ref string) string {
	if strings.Contains(ref, "@") {
		return ref
	}
	if i := strings.LastIndex(ref, ":"); i < 0 || strings.Contains(ref[i:], "/") {
		return ref + ":latest"
	}
	return ref
}

// repository is an image reference without its tag or digest.
func repository(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i >= 0 && !strings.Contains(ref[i:], "/") {
		ref = ref[:i]
	}
	return strings.TrimPrefix(ref, "docker.io/")
}
