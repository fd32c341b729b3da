package bundle

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// The compose model is never loaded in the agent's own process: loadCompose and the policy run
// in a child the operating system bounds (internal/budget), the agent's binary re-executed as a
// stateless loader. The parent hands the child the bundle's files and reads back a verdict: a
// refusal, or the policy's findings. The child counts the costs of each compose file first
// (composeBound: the clear words), then loads. A child stopped by its budget is BUNDLE_INVALID
// naming the bound. The agent's own process never parses the compose file.

// loadOp is the child's op name (budget.Serve).
const loadOp = "compose-check"

// loadVersion is the version of the request and answer below; a child of another version is
// refused (it cannot be: the child is the parent's own binary).
const loadVersion = 2

type loadRequest struct {
	V           int               `json:"v"`
	Files       map[string][]byte `json:"files"`
	Dirs        []string          `json:"dirs"`
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
	b := &Bundle{Files: req.Files, Dirs: req.Dirs, Meta: Meta{ComposeFile: req.ComposeFile, EnvID: req.EnvID}}
	ans := loadAnswer{V: loadVersion}
	tpl, err := parseEnvTemplate(b.Files[TemplateFile])
	if err != nil {
		return nil, err // the parent parsed it first
	}
	m, r := loadCompose(b, tpl, req.Compose, req.EnvID)
	if r != nil {
		ans.Code, ans.Detail = r.Code, r.Detail
	} else {
		ans.Findings, ans.Unlisted = m.findings(b)
	}
	return json.Marshal(ans)
}

// loadBounded has a child count the costs of b's compose file and, within the bounds, load it
// and run the policy: the policy's findings and whether each is a field the allowlist does not
// name, or a *Refusal. A context that ends before the child answers is an error wrapping
// budget.ErrCancelled: nothing is decided.
func loadBounded(ctx context.Context, b *Bundle, env ComposeEnv, envID string) (findings []string, unlisted bool, err error) {
	name := b.Meta.ComposeFile
	if n := len(b.Files[name]); n > MaxComposeBytes {
		return nil, false, invalid("%s %s", quoteName(name), composeBound(b.Files[name])) // the size alone: no parse here
	}
	req, err := json.Marshal(loadRequest{V: loadVersion, Files: b.Files, Dirs: b.Dirs, ComposeFile: name, EnvID: envID, Compose: env})
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
