package states

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// checkModel is the policy's findings on the model compose will run, as words, and whether
// each is a field the allowlist does not name.
func checkModel(p *types.Project, rel string, allowPrivileged bool) (words []string, unlisted bool) {
	found := bundle.CheckModel(p, rel, allowPrivileged)
	for _, f := range found {
		words = append(words, f.String())
	}
	return words, bundle.OnlyUnlisted(found)
}

// The stage's load of the model compose will run — the release's compose file with the
// secrets' values — runs, like the check before the lease (internal/bundle, isolate.go), in
// the agent's binary re-executed as a loader child the operating system bounds
// (internal/budget): docker.Load, the policy and docker.Resolve, and the resolved model comes
// back. The secrets reach the child on its stdin, never its environment or a file.

// stageOp is the child's op name (budget.Serve); stageVersion the version of its request and
// answer.
const (
	stageOp      = "compose-stage"
	stageVersion = 2
)

type stageRequest struct {
	V               int    `json:"v"`
	Rel             string `json:"rel"`
	ComposeFile     string `json:"compose_file"`
	Content         []byte `json:"content"`
	Env             []byte `json:"env"`
	Project         string `json:"project"`
	AllowPrivileged bool   `json:"allow_privileged"`
}

type stageAnswer struct {
	V      int          `json:"v"`
	Code   vocab.Code   `json:"code,omitempty"`
	Reason vocab.Reason `json:"reason,omitempty"` // version 2: the typed cause behind Code
	Detail string       `json:"detail,omitempty"`
	Model  []byte       `json:"model,omitempty"`
	// Services are the model's services as the health gate judges them (absent from an older
	// loader's answer: the gate then judges what compose lists).
	Services []docker.Service `json:"services,omitempty"`
}

func init() { budget.Serve(stageOp, serveStage) }

// serveStage is the child: load, decide, resolve.
func serveStage(raw []byte) ([]byte, error) {
	var req stageRequest
	if err := budget.Decode(raw, &req, stageVersion); err != nil {
		return nil, err
	}
	ans := stageAnswer{V: stageVersion}
	p, err := docker.Load(context.Background(), req.Rel, req.ComposeFile, req.Content, req.Env, req.Project)
	switch {
	case err != nil:
		ans.Code, ans.Detail = vocab.BundleInvalid, err.Error()
	default:
		if f, unlisted := checkModel(p, req.Rel, req.AllowPrivileged); len(f) > 0 {
			ans.Code, ans.Detail = vocab.PrivilegedRefused, strings.Join(f, "; ")+" (in the model compose would run; bundle.json agent.allow_privileged is not set)"
			if unlisted {
				ans.Reason = vocab.ReasonUnlistedField
			}
		} else if ans.Model, err = docker.Resolve(p); err != nil {
			ans.Code, ans.Detail = vocab.BundleInvalid, err.Error()
		} else {
			ans.Services = docker.ServicesOf(p)
		}
	}
	return json.Marshal(ans)
}

// loaderUnavailable is the temporary LOADER_UNAVAILABLE of a loader child that could not start
// or answer: never remembered for the sha (the release was not judged), the next tick loads it
// again.
func loaderUnavailable(op string, err error) error {
	return &effects.Error{Op: op, Kind: effects.Temporary, Code: vocab.LoaderUnavailable,
		Msg: "the loader child could not start or answer (the agent's binary replaced or removed, an upgrade in progress?): " + err.Error() + "; the release is loaded again at the next tick", Err: err}
}

// resolveModel has a bounded child load the release written at rel with its rendered .env,
// run the policy and resolve the model: the resolved model, a *modelRefused (the policy's
// findings, a model that does not load, or one past the budget), or an error of the child's
// start or of a cancelled tick.
func resolveModel(ctx context.Context, b *bundle.Bundle, env []byte, rel, project string) ([]byte, []docker.Service, error) {
	name := b.Meta.ComposeFile
	req, err := json.Marshal(stageRequest{V: stageVersion, Rel: rel, ComposeFile: name, Content: b.Files[name],
		Env: env, Project: project, AllowPrivileged: b.Meta.Agent.AllowPrivileged})
	if err != nil {
		return nil, nil, err
	}
	defer clear(req)
	out, err := budget.Run(ctx, stageOp, req)
	defer clear(out)
	var over *budget.Exceeded
	switch {
	case errors.As(err, &over):
		return nil, nil, &modelRefused{code: vocab.BundleInvalid, detail: fmt.Sprintf("%s: %s, a bound for loading a release's model (docs/SECURITY.md)", name, over.Words)}
	case errors.Is(err, budget.ErrCancelled):
		return nil, nil, &effects.Error{Op: "stage", Kind: effects.Temporary, Msg: err.Error(), Err: err}
	case errors.Is(err, budget.ErrUnavailable):
		return nil, nil, loaderUnavailable("stage", err)
	case err != nil:
		return nil, nil, &modelRefused{code: vocab.BundleInvalid, detail: fmt.Sprintf("%s does not load: the loader failed: %v", name, err)}
	}
	var ans stageAnswer
	if err := json.Unmarshal(out, &ans); err != nil || ans.V != stageVersion {
		return nil, nil, &modelRefused{code: vocab.BundleInvalid, detail: name + " does not load: the loader's answer does not read"}
	}
	if ans.Code != "" {
		return nil, nil, &modelRefused{code: ans.Code, reason: ans.Reason, detail: ans.Detail}
	}
	return ans.Model, ans.Services, nil
}
