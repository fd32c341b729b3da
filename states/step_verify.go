package states

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
)

const (
	codeDisk     = vocab.DiskInsufficient
	codeRollback = vocab.RollbackRefused
)

// fetchBundle reads and checks the flight's bundle: the one kept on disk for its sha when there
// is one that verifies again, else the one tenancy serves, which is then kept for the retries
// of this apply (bundlecache.go). A refusal comes back as *bundle.Refusal.
//
// Idempotent: it writes nothing but the kept bundle; a resumed flight verifies again rather
// than trust memory.
func (tk *tick) fetchBundle(ctx context.Context) (*bundle.Bundle, error) {
	rec := tk.eng.Record()
	if f, size := tk.keptBundle(rec.Sha); f != nil {
		b, err := bundle.ReadFrom(f, size, tk.Cfg.MaxBundleBytes)
		if err == nil && b.Sha == rec.Sha {
			return tk.checkBundle(ctx, b, rec.Sha)
		}
		tk.Log.Warn().Msg("the kept bundle of " + machine.ShortSha(rec.Sha) + " no longer verifies; fetching it again")
		tk.dropKeptBundle(rec.Sha)
	}
	url := rec.BundleURL
	if url == "" {
		url = "/v1/agent/bundle/" + tk.Cfg.EnvID + "/" + rec.Sha
	}
	f, err := tk.fetchFile()
	if err != nil {
		return nil, fmt.Errorf("a file to fetch the bundle into: %w", err)
	}
	var blob effects.Bundle
	err = tk.withBearer(ctx, func() error {
		if err := rewind(f); err != nil {
			return err
		}
		var err error
		blob, err = tk.Fx.Tenancy.FetchBundle(ctx, tk.token, url, tk.Cfg.MaxBundleBytes, f)
		return err
	})
	if err != nil {
		tk.discardFetched(f)
		if effects.CodeOf(err) == vocab.BundleInvalid {
			return nil, &bundle.Refusal{Code: vocab.BundleInvalid, Detail: err.Error()}
		}
		return nil, err
	}
	b, err := bundle.ReadFrom(f, blob.Size, tk.Cfg.MaxBundleBytes)
	if err != nil {
		tk.discardFetched(f)
		return nil, err
	}
	if blob.HeaderSha != "" && blob.HeaderSha != b.Sha {
		tk.Log.Warn().Msgf("bundle header sha %s disagrees with the content's %s; enforcing the desired sha", sanitize.Line(machine.ShortSha(blob.HeaderSha)), machine.ShortSha(b.Sha))
	}
	b, err = tk.checkBundle(ctx, b, rec.Sha)
	if err == nil {
		tk.keepBundle(rec.Sha, f)
	} else {
		tk.discardFetched(f) // still open: this tick reads it to its end
	}
	return b, err
}

// rewind empties f for a download (again: a retry after a new login starts over).
func rewind(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

// checkBundle runs every refusal of PROTOCOL.md §2 against b for the desired sha. The compose
// file is loaded in a child bounded in memory and CPU and killed at ctx's end (internal/budget):
// a load past the budget is a refusal like any other, a load the tick's end cut short decides
// nothing and is temporary (the next tick loads it again).
func (tk *tick) checkBundle(ctx context.Context, b *bundle.Bundle, sha string) (*bundle.Bundle, error) {
	// compose is handed the resolved model alone, in an environment the agent sets whole
	// (effects/docker): nothing of the agent's own environment is interpolated
	in := model.CheckInput{DesiredSha: sha, EnvID: tk.Cfg.EnvID, KVMount: tk.kvMount(),
		Compose: model.ComposeEnv{Project: tk.Cfg.ComposeProject}}
	err := model.CheckContext(ctx, b, in)
	if errors.Is(err, budget.ErrCancelled) {
		return b, &effects.Error{Op: "verify", Kind: effects.Temporary, Msg: err.Error(), Err: err}
	}
	if errors.Is(err, budget.ErrUnavailable) {
		return b, loaderUnavailable("verify", err)
	}
	return b, err
}

// stepVerify: CheckedIn → BundleVerified | Refused | Failed. Fetch, read, check the archive,
// its sha, env and references — all before any lease.
func (tk *tick) stepVerify(ctx context.Context) error {
	started := tk.Now()
	b, err := tk.fetchBundle(ctx)
	var r *bundle.Refusal
	switch {
	case err != nil && tk.isBlocked():
		return err
	case errors.As(err, &r):
		return tk.refuse(ctx, r.Code, r.Reason, r.Detail, 0)
	case err != nil && effects.KindOf(err) == effects.NotFound:
		return tk.failBecause(ctx, machine.CheckedIn, vocab.BundleNotFound, effects.ReasonOf(err), err.Error(), false)
	case err != nil && effects.IsTemporary(err):
		tk.noteStop(machine.NoteFetchFailed, err, started, "")
		return err
	case err != nil:
		return tk.failBecause(ctx, machine.CheckedIn, codeOr(err, vocab.BundleFetchFailed), effects.ReasonOf(err), err.Error(), false)
	}
	tk.bundle = b
	detail := fmt.Sprintf("bundle %s verified: %d files, sha matches", machine.ShortSha(b.Sha), b.Count())
	return tk.eng.Fire(machine.Outcome{Event: machine.EvVerify, Detail: detail}, started)
}

// currentBundle is the flight's bundle, fetched again when this tick resumes a flight.
func (tk *tick) currentBundle(ctx context.Context) (*bundle.Bundle, error) {
	if tk.bundle != nil && tk.bundle.Sha == tk.eng.Record().Sha {
		return tk.bundle, nil
	}
	b, err := tk.fetchBundle(ctx)
	if err != nil {
		return nil, err
	}
	tk.bundle = b
	return b, nil
}

// resumeBundleError turns a bundle that no longer verifies on a resumed flight into a failure.
func (tk *tick) resumeBundleError(ctx context.Context, from machine.State, err error) error {
	if effects.IsTemporary(err) || tk.isBlocked() {
		return err
	}
	code := codeOr(err, vocab.BundleFetchFailed)
	if effects.KindOf(err) == effects.NotFound {
		code = vocab.BundleNotFound // a 404, whatever tenancy's own code: as stepVerify reads it
	}
	return tk.failBecause(ctx, from, code, effects.ReasonOf(err), "fetching the bundle again to resume: "+err.Error(), false)
}

func codeOr(err error, fallback vocab.Code) vocab.Code {
	var r *bundle.Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	if c := effects.CodeOf(err); c != "" {
		return c
	}
	return fallback
}
