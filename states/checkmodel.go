package states

import (
	"context"
	"errors"
	"fmt"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/vocab"
)

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
func resolveModel(ctx context.Context, b *bundle.Bundle, env []byte, rel, project string) ([]byte, []model.Service, error) {
	name := b.Meta.ComposeFile
	ans, err := model.Run(ctx, model.Request{Want: model.WantStage, Rel: rel, ComposeFile: name, Content: b.Files[name],
		Env: env, Project: project, AllowPrivileged: b.Meta.Agent.AllowPrivileged})
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
	if ans.Code != "" {
		return nil, nil, &modelRefused{code: ans.Code, reason: ans.Reason, detail: ans.Detail}
	}
	return ans.Model, ans.Services, nil
}
