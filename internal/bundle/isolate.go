package bundle

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/vocab"
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

// loadOp is the child's op name (budget.Serve).
const loadOp = "compose-check"

// loadVersion is the version of the request and answer below; a child of another version is
// refused (it cannot be: the child is the parent's own binary).
const loadVersion = 3

type loadRequest struct {
	V int `json:"v"`
	// Root is the scratch copy's release directory, Private its private parent, Names the
	// files written below Root (version 3: the files no longer cross).
	Root     string   `json:"root"`
	Private  string   `json:"private"`
	Names    []string `json:"names"`
	Template []byte   `json:"template"`
	// Withheld are the files not written, and why.
	Withheld    map[string]string `json:"withheld,omitempty"`
	ComposeFile string            `json:"compose_file"`
	EnvID       string            `json:"env_id"`
	Compose     ComposeEnv        `json:"compose"`
}

type loadAnswer struct {
	V        int        `json:"v"`
	Code     vocab.Code `json:"code,omitempty"`
	Detail   string     `json:"detail,omitempty"`
	Findings []string   `json:"findings,omitempty"`
	// Unlisted: every finding is a field the allowlist does not name (version 2).
	Unlisted bool `json:"unlisted,omitempty"`
}

func init() { budget.Serve(loadOp, serveLoad) }

// serveLoad is the child: it loads the compose file and runs the policy.
func serveLoad(raw []byte) ([]byte, error) {
	var req loadRequest
	if err := budget.Decode(raw, &req, loadVersion); err != nil {
		return nil, err
	}
	ans := loadAnswer{V: loadVersion}
	tpl, err := parseEnvTemplate(req.Template)
	if err != nil {
		return nil, err // the parent parsed it first
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
	return json.Marshal(ans)
}

// loadBounded has a child count the costs of b's compose file and, within the bounds, load it
// and run the policy: the policy's findings and whether each is a field the allowlist does not
// name, or a *Refusal. A context that ends before the child answers is an error wrapping
// budget.ErrCancelled: nothing is decided.
func loadBounded(ctx context.Context, b *Bundle, env ComposeEnv, envID string) (findings []string, unlisted bool, err error) {
	name := b.Meta.ComposeFile
	if why := sizeBound(b.Size(name)); why != "" {
		return nil, false, invalid("%s %s", quoteName(name), why) // the size alone: no parse here
	}
	sc, withheld, err := writeScratch(b, env.ScratchDir)
	if sc.private != "" {
		defer os.RemoveAll(sc.private)
	}
	if err != nil {
		return nil, false, invalid("cannot write a scratch copy to load the compose file: %v", err)
	}
	req, err := json.Marshal(loadRequest{V: loadVersion, Root: sc.root, Private: sc.private, Names: sc.names,
		Template: b.Files[TemplateFile], Withheld: withheld, ComposeFile: name, EnvID: envID, Compose: env})
	if err != nil {
		return nil, false, invalid("cannot hand the compose file to the loader: %v", err)
	}
	out, err := budget.Run(ctx, loadOp, req)
	var over *budget.Exceeded
	switch {
	case errors.As(err, &over):
		return nil, false, invalid("%s: %s, a bound for loading a release's model (docs/SECURITY.md)", quoteName(name), over.Words)
	case errors.Is(err, budget.ErrCancelled), errors.Is(err, budget.ErrUnavailable):
		return nil, false, err // nothing is decided: the next tick loads it again
	case err != nil:
		return nil, false, invalid("%s does not load: the loader failed: %v", quoteName(name), err)
	}
	var ans loadAnswer
	if err := json.Unmarshal(out, &ans); err != nil || ans.V != loadVersion {
		return nil, false, invalid("%s does not load: the loader's answer does not read", quoteName(name))
	}
	if ans.Code != "" {
		return nil, false, &Refusal{Code: ans.Code, Detail: ans.Detail}
	}
	return ans.Findings, ans.Unlisted, nil
}
