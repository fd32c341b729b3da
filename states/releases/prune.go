package releases

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/distribution/reference"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/machine"
)

// ImageStore is the part of the docker CLI that removing images needs beyond effects.Compose.
type ImageStore interface {
	Images(ctx context.Context) ([]string, error)
	RemoveImage(ctx context.Context, ref string) error
	ImageSize(ctx context.Context, ref string) (int64, error)
}

// Pruner removes what a prune plans, under one deploy_dir.
type Pruner struct {
	FS        files.FS
	DeployDir string
	Keep      int // keep_releases
	// Compose, when not nil, also has the env's images no kept release names removed
	// (`run --prune`), then dangling ones.
	Compose effects.Compose
	// Store, when not nil, has the images that only the removed releases named removed after
	// their directories (every apply): never one a kept release names, never one a container of
	// any project uses (docker image rm without -f refuses it).
	Store   ImageStore
	Project string // the compose project the releases run as
}

// Prune removes the release directories beyond Keep, oldest first by when each was applied
// (applied, from the state file; a directory never applied counts as the oldest), never a
// protected one (`current`, the one in flight, the desired one), and the resolved models whose
// release is gone; with Compose, the images too. It says what it did, "" when nothing; a
// failure is said, never returned: it is never the apply's failure.
func (p Pruner) Prune(ctx context.Context, protected map[string]bool, applied map[string]time.Time) (string, error) {
	releases := filepath.Join(p.DeployDir, "releases")
	entries, err := p.FS.ReadDir(releases)
	if err != nil {
		return "", err
	}
	var dirs []Dir
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d := Dir{Name: e.Name(), Applied: applied[e.Name()]}
		if info, err := e.Info(); err == nil {
			d.Mod = info.ModTime()
		}
		dirs = append(dirs, d)
	}
	kept, gone := Plan(dirs, protected, p.Keep)
	var goneImages []reference.Named
	var imagesUnread string
	if p.Store != nil && len(gone) > 0 {
		// read before the directories go: the images a removed release named
		for _, name := range gone {
			refs, err := ReleaseImages(ctx, filepath.Join(releases, name), p.Project)
			if err != nil {
				imagesUnread = err.Error()
				break
			}
			goneImages = append(goneImages, refs...)
		}
	}
	var removed, failed []string
	for _, name := range gone {
		if err := p.FS.RemoveAll(filepath.Join(releases, name)); err != nil {
			failed = append(failed, machine.ShortSha(name)+": "+err.Error())
			continue
		}
		removed = append(removed, machine.ShortSha(name))
	}
	failed = append(failed, p.removeOrphanModels(releases)...)
	var words []string
	if len(removed) > 0 {
		words = append(words, fmt.Sprintf("removed %d release(s) beyond keep_releases %d, oldest first: %s", len(removed), p.Keep, strings.Join(removed, ", ")))
	}
	if len(failed) > 0 {
		words = append(words, "could not remove "+strings.Join(failed, "; "))
	}
	keptDirs := make([]string, len(kept))
	for i, name := range kept {
		keptDirs[i] = filepath.Join(releases, name)
	}
	switch {
	case p.Compose != nil:
		words = append(words, p.pruneImages(ctx, keptDirs))
	case imagesUnread != "":
		words = append(words, "images: none removed ("+imagesUnread+")")
	case len(goneImages) > 0:
		if w := p.removeGoneImages(ctx, goneImages, keptDirs); w != "" {
			words = append(words, w)
		}
	}
	return strings.Join(words, "; "), nil
}

// removeGoneImages removes the images the removed releases named that no kept release names and
// the engine holds, and says what it removed and the bytes freed ("" when none was there).
func (p Pruner) removeGoneImages(ctx context.Context, gone []reference.Named, keptDirs []string) string {
	var used []reference.Named
	for _, dir := range keptDirs {
		refs, err := ReleaseImages(ctx, dir, p.Project)
		if err != nil {
			return "images: none removed (" + err.Error() + ")"
		}
		used = append(used, refs...)
	}
	have, err := p.Store.Images(ctx)
	if err != nil {
		return "images: none removed (" + err.Error() + ")"
	}
	return p.remove(ctx, OnlyGone(gone, used, have), "only releases no longer kept named")
}

// Reclaim removes the local images of the env's repositories that no release kept under
// deploy_dir names (never one a container uses), before a disk check refuses: it says what it
// removed and the bytes freed, and returns the bytes.
func (p Pruner) Reclaim(ctx context.Context) (string, int64) {
	releases := filepath.Join(p.DeployDir, "releases")
	entries, err := p.FS.ReadDir(releases)
	if err != nil || p.Store == nil {
		return "", 0
	}
	var used []reference.Named
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		refs, err := ReleaseImages(ctx, filepath.Join(releases, e.Name()), p.Project)
		if err != nil {
			return "images: none reclaimed (" + err.Error() + ")", 0
		}
		used = append(used, refs...)
	}
	have, err := p.Store.Images(ctx)
	if err != nil {
		return "images: none reclaimed (" + err.Error() + ")", 0
	}
	refs := Images(used, have)
	if len(refs) == 0 {
		return "", 0
	}
	words, freed := p.removeCounting(ctx, refs, "no kept release names")
	return words, freed
}

// remove removes refs and says so ("" when refs is empty).
func (p Pruner) remove(ctx context.Context, refs []string, why string) string {
	if len(refs) == 0 {
		return ""
	}
	words, _ := p.removeCounting(ctx, refs, why)
	return words
}

// removeCounting removes refs (docker image rm, never -f) and says which went, the bytes they
// held (as docker image inspect measured them before), and which stayed.
func (p Pruner) removeCounting(ctx context.Context, refs []string, why string) (string, int64) {
	var gone, left []string
	var freed int64
	for _, ref := range refs {
		size, serr := p.Store.ImageSize(ctx, ref)
		if err := p.Store.RemoveImage(ctx, ref); err != nil {
			left = append(left, ref)
			continue
		}
		gone = append(gone, ref)
		if serr == nil {
			freed += size
		}
	}
	msg := fmt.Sprintf("images: removed %d %s: %s (%s freed)", len(gone), why, strings.Join(gone, ", "), machine.Size(freed))
	if len(gone) == 0 {
		msg = "images: removed none " + why
	}
	if len(left) > 0 {
		msg += fmt.Sprintf("; %d still in use or not removable: %s", len(left), strings.Join(left, ", "))
	}
	return msg, freed
}

// removeOrphanModels removes the resolved models whose release is gone: a resolved model holds
// the secrets' values, so it goes with its release (and one whose release is gone, left by a
// kill between the two removals, goes now). It returns what it could not remove.
func (p Pruner) removeOrphanModels(releases string) []string {
	var failed []string
	models := filepath.Join(p.DeployDir, model.ResolvedDirName)
	ms, _ := p.FS.ReadDir(models)
	for _, m := range ms {
		sha, ok := strings.CutSuffix(m.Name(), ".yaml")
		if !ok {
			sha, ok = strings.CutSuffix(m.Name(), ".services.json") // the model's service list goes with it
		}
		if !ok || !bundle.ValidSha(sha) {
			continue
		}
		if _, err := p.FS.Lstat(filepath.Join(releases, sha)); errors.Is(err, fs.ErrNotExist) {
			if err := p.FS.Remove(filepath.Join(models, m.Name())); err != nil {
				failed = append(failed, "model "+machine.ShortSha(sha)+": "+err.Error())
			}
		}
	}
	return failed
}

// pruneImages removes the local images of the env's repositories (every repository a kept
// release names) that no kept release names, then dangling images; it says what it did.
// Images of other repositories (anything else the host runs) are never touched. A release
// whose compose model cannot be loaded stops the removal: an image it may use is not removed
// on a guess.
func (p Pruner) pruneImages(ctx context.Context, keptDirs []string) string {
	is, ok := p.Compose.(ImageStore)
	if !ok {
		return "images: this docker cannot list images; none removed"
	}
	var used []reference.Named
	for _, dir := range keptDirs {
		refs, err := ReleaseImages(ctx, dir, p.Project)
		if err != nil {
			return "images: none removed (" + err.Error() + ")"
		}
		used = append(used, refs...)
	}
	have, err := is.Images(ctx)
	if err != nil {
		return "images: none removed (" + err.Error() + ")"
	}
	var gone, left []string
	for _, ref := range Images(used, have) {
		if err := is.RemoveImage(ctx, ref); err != nil {
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
	if err := p.Compose.ImagePrune(ctx); err != nil {
		msg += "; docker image prune: " + err.Error()
	} else {
		msg += "; dangling images pruned"
	}
	return msg
}
