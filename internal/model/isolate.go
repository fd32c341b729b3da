package model

import (
	"context"
	"errors"
	"os"

	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/bundle"
)

// The compose model is never loaded in the agent's own process: loadCompose and the policy run
// in a child the operating system bounds (internal/budget), the agent's binary re-executed as a
// stateless loader. The parent writes the bundle's files to a private scratch copy (writeScratch:
// a file over the bounds of a compose file by its size alone is not written) and hands the
// child its path, never the files: the child reads one file at a time, what compose reads and
// the bounds judge, so that a bundle's assets never count against the child's memory. It
// counts the costs of each file first (composeBound: the clear words), loads, runs the policy
// and, when the policy finds nothing, reads the env_file and label_file contents as compose
// will, so that a bundle compose would refuse for them is refused before any lease. It reads
// back a verdict: a refusal, or the policy's findings. A child stopped by its budget is
// BUNDLE_INVALID naming the bound. The parent removes the scratch copy, whatever became of the
// child. The agent's own process never parses the compose file.

// serveCheck is the child's answer to WantCheck (child.go): it loads the compose file from the
// scratch copy and runs the policy.
func serveCheck(req Request) (Answer, error) {
	ans := Answer{V: version}
	tpl, err := bundle.ParseEnvTemplate(req.Template)
	if err != nil {
		return ans, err // the parent parsed it first
	}
	if req.Withheld == nil {
		req.Withheld = map[string]string{}
	}
	sc := scratchCopy{root: req.Root, private: req.Private, names: req.Names}
	m, r := loadCompose(sc, req.Withheld, req.ComposeFile, tpl, req.Compose, req.EnvID)
	if r == nil {
		if ans.Findings, ans.Unlisted = m.findings(); len(ans.Findings) == 0 {
			r = m.resolveFiles(req.ComposeFile, req.Template, req.Withheld)
		}
	}
	if r != nil {
		ans.Code, ans.Detail = r.Code, r.Detail
		ans.Findings, ans.Unlisted = nil, false
	}
	return ans, nil
}

// loadBounded has a child count the costs of b's compose file and, within the bounds, load it
// and run the policy: the policy's findings and whether each is a field the allowlist does not
// name, or a *Refusal. A context that ends before the child answers is an error wrapping
// budget.ErrCancelled: nothing is decided.
func loadBounded(ctx context.Context, b *bundle.Bundle, env ComposeEnv, envID string) (findings []string, unlisted bool, err error) {
	name := b.Meta.ComposeFile
	if why := sizeBound(b.Size(name)); why != "" {
		return nil, false, bundle.Invalid("%s %s", bundle.QuoteName(name), why) // the size alone: no parse here
	}
	sc, withheld, err := writeScratch(b, env.ScratchDir)
	if sc.private != "" {
		defer os.RemoveAll(sc.private)
	}
	if err != nil {
		return nil, false, bundle.Invalid("cannot write a scratch copy to load the compose file: %v", err)
	}
	ans, err := Run(ctx, Request{Want: WantCheck, Root: sc.root, Private: sc.private, Names: sc.names,
		Template: b.Files[bundle.TemplateFile], Withheld: withheld, ComposeFile: name, EnvID: envID, Compose: env})
	var over *budget.Exceeded
	switch {
	case errors.As(err, &over):
		return nil, false, bundle.Invalid("%s: %s, a bound for loading a release's model (docs/SECURITY.md)", bundle.QuoteName(name), over.Words)
	case errors.Is(err, budget.ErrCancelled), errors.Is(err, budget.ErrUnavailable):
		return nil, false, err // nothing is decided: the next tick loads it again
	case err != nil:
		return nil, false, bundle.Invalid("%s does not load: the loader failed: %v", bundle.QuoteName(name), err)
	}
	if ans.Code != "" {
		return nil, false, &bundle.Refusal{Code: ans.Code, Detail: ans.Detail}
	}
	return ans.Findings, ans.Unlisted, nil
}
