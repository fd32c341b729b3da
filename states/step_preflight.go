package states

import (
	"context"
	"errors"
	"fmt"
	"os"

	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/states/releases"
	"github.com/tikali/monky-deployd/store"
)

// stepPreflight: BundleVerified → Refused | Leased | LoggedIn | Failed. The checks that need
// this box (rollback, compose can run, disk), then a token fit to read the secrets: reused when it can be,
// leased when it must be — never a lease the budget cannot afford.
func (tk *tick) stepPreflight(ctx context.Context) error {
	started := tk.Now()
	b, err := tk.currentBundle(ctx)
	if err != nil {
		var r *bundle.Refusal
		if errors.As(err, &r) {
			return tk.refuse(ctx, r.Code, r.Reason, r.Detail, 0)
		}
		return tk.resumeBundleError(ctx, machine.BundleVerified, err)
	}
	rec := tk.eng.Record()
	var at time.Time
	var before bool
	if rec.Sha != rec.AppliedSha {
		at, before = tk.appliedBefore(rec.Sha)
	}
	switch refuse, note := planRollback(rec.Sha, rec.AppliedSha, at, before, b.Meta.Agent.AllowRollback); {
	case refuse != "":
		return tk.refuse(ctx, codeRollback, "", refuse, 0)
	case note != "":
		if err := tk.eng.Note(machine.NoteRollbackAllowed, "", "", note, started, nil); err != nil {
			return err
		}
	}
	if code, reason, detail, err := tk.composeReady(ctx); err != nil {
		return err
	} else if code != "" {
		return tk.refuse(ctx, code, reason, detail, 0)
	}
	ok, detail, err := tk.diskEnough(ctx, b.Meta.DiskNeedBytes)
	if err != nil {
		return err
	}
	if !ok {
		return tk.refuse(ctx, codeDisk, "", detail, b.Meta.DiskNeedBytes)
	}
	man, err := b.Manifest()
	if err != nil {
		return tk.refuse(ctx, vocab.BundleInvalid, "", err.Error(), 0)
	}
	if len(man.Entries) == 0 {
		return tk.eng.Fire(machine.Outcome{Event: machine.EvReuse, Detail: "no secrets to read: no lease needed"}, started)
	}
	return tk.credentialForApply(ctx, started)
}

// composeReady asks whether compose can run here at all (the docker CLI, compose v2, docker's
// socket) before an apply spends a lease or reads a secret: code, its typed reason and detail
// name what is missing (DOCKER_NOT_FOUND, of the CLI or of compose v2, DOCKER_GROUP_MISSING),
// "" when it can run or when the Compose cannot tell. Only a temporary failure of the question
// itself is returned as err.
func (tk *tick) composeReady(ctx context.Context) (vocab.Code, vocab.Reason, string, error) {
	r, ok := tk.Fx.Compose.(effects.ComposeReady)
	if !ok {
		return "", "", "", nil
	}
	err := r.Ready(ctx)
	switch {
	case err == nil:
		return "", "", "", nil
	case effects.IsTemporary(err):
		return "", "", "", err
	}
	code := effects.CodeOf(err)
	if code == "" {
		code = vocab.DockerNotFound
	}
	detail := err.Error()
	var e *effects.Error
	if errors.As(err, &e) {
		detail = e.Msg + "; no lease was asked and no secret read"
		if e.Hint != "" {
			detail += " — " + e.Hint
		}
	}
	return code, effects.ReasonOf(err), detail, nil
}

// boxRefusal reports whether a refusal with code is about this box, not the bundle: measured
// again at every tick, and cleared by the box alone (space freed, docker installed).
func boxRefusal(code vocab.Code) bool {
	return code == codeDisk || code == vocab.DockerNotFound || code == vocab.DockerGroupMissing
}

// planRollback decides on a flight towards sha when applied is the sha applied now and sha was
// applied on this box before (before, at at): refused, with the refusal's words, unless
// bundle.json's agent.allow_rollback is set (allow); then allowed, with the note's words. Both
// are "" when the flight is no rollback.
func planRollback(sha, applied string, at time.Time, before, allow bool) (refuse, note string) {
	if sha == applied || !before {
		return "", ""
	}
	if !allow {
		return fmt.Sprintf("%s was applied on this box before (%s) and is not the one applied now (%s); bundle.json agent.allow_rollback is not set",
			machine.ShortSha(sha), machine.Stamp(at), machine.ShortSha(applied)), ""
	}
	return "", fmt.Sprintf("rollback to %s (applied on this box before, %s; applied now %s): allowed by bundle.json agent.allow_rollback",
		machine.ShortSha(sha), machine.Stamp(at), machine.ShortSha(applied))
}

// appliedBefore reports whether sha is in the applied history since the last retire (a
// retired env starts afresh), and when it was applied.
func (tk *tick) appliedBefore(sha string) (time.Time, bool) {
	var at time.Time
	var found bool
	retired := tk.eng.Record().RetiredAt
	_ = tk.Store.View(func(tx store.Tx) error {
		h, err := tx.AppliedHistory()
		for _, x := range h {
			if x.Sha == sha && x.At.After(retired) {
				at, found = x.At, true
			}
		}
		return err
	})
	return at, found
}

// diskEnough measures every filesystem a pull can fill — docker's data-root and containerd's
// root where it exists — against need × factor + headroom (headroom alone when need is 0).
//
// Before it says no, the images of the env's repositories that no kept release names are
// reclaimed (never one a container uses) and the disk is measured again; the journal says what
// went and the bytes freed.
func (tk *tick) diskEnough(ctx context.Context, need int64) (bool, string, error) {
	ok, detail, err := tk.measureDisk(ctx, need)
	if ok || err != nil {
		return ok, detail, err
	}
	is, can := tk.Fx.Compose.(releases.ImageStore)
	if !can {
		return ok, detail, err
	}
	started := tk.Now()
	p := releases.Pruner{FS: tk.fs(), DeployDir: tk.Cfg.DeployDir, Project: tk.Cfg.ComposeProject, Store: is}
	words, freed := p.Reclaim(ctx)
	if words == "" {
		return ok, detail, err
	}
	words = "before refusing " + string(codeDisk) + ": " + words
	tk.Log.Info().Msg("reclaim: " + words)
	if nerr := tk.eng.Note(machine.NotePrune, "", "", words, started, nil); nerr != nil {
		tk.Log.Warn().Msg("reclaim: " + nerr.Error())
	}
	if freed == 0 {
		return ok, detail + "; " + words, nil
	}
	ok, detail, err = tk.measureDisk(ctx, need)
	if err == nil && !ok {
		detail += "; measured again after " + words
	}
	return ok, detail, err
}

// measureDisk is diskEnough's measure, with no reclaim.
func (tk *tick) measureDisk(ctx context.Context, need int64) (bool, string, error) {
	root, err := tk.Fx.Compose.DataRoot(ctx)
	if err != nil {
		if effects.IsTemporary(err) {
			return false, "", err
		}
		tk.Log.Warn().Msg("docker info: " + err.Error() + "; measuring /var/lib/docker")
		root = "/var/lib/docker"
	}
	paths := []string{root}
	for _, p := range tk.ContainerdRoots {
		if st, err := os.Stat(p); err == nil && st.IsDir() && p != root {
			paths = append(paths, p)
		}
	}
	var free uint64
	for i, p := range paths {
		f, err := tk.Fx.Disk.Free(p)
		if err != nil {
			return false, "", fmt.Errorf("measure free space on %s: %w", p, err)
		}
		if i == 0 || f < free {
			free = f
		}
	}
	headroom := tk.Cfg.Disk.HeadroomBytes
	required := headroom
	var sized string
	if need > 0 {
		required = int64(float64(need)*tk.Cfg.Disk.Factor) + headroom
		sized = fmt.Sprintf("bundle needs %s (its disk_need_bytes %s × %g + %s headroom)", machine.Size(required), machine.Size(need), tk.Cfg.Disk.Factor, machine.Size(headroom))
	} else {
		sized = fmt.Sprintf("a pull needs at least %s headroom (the bundle declares no size)", machine.Size(required))
	}
	tk.diskFree = int64(min(free, 1<<62))
	detail := fmt.Sprintf("image storage (%s) has %s free, %s", joinPaths(paths), machine.Size(int64(min(free, 1<<62))), sized)
	return free >= uint64(required), detail, nil
}

func joinPaths(p []string) string {
	s := ""
	for i, x := range p {
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}
