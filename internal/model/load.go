package model

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/sirupsen/logrus"

	"github.com/tikali/monky-deployd/internal/composeguard"
	"github.com/tikali/monky-deployd/internal/sanitize"
)

// What compose runs is the model the agent checked (docs/SECURITY.md, "What runs is exactly
// what was checked"). After the secrets are read and the release is written, the agent loads the
// release's compose file with compose-go from exactly what compose would be handed — the
// release's files, the values of its rendered `.env`, and no process environment at all — and
// the policy decides on that model. The model is then resolved (env_file and label_file folded
// in and dropped, every path absolute, no interpolation left, every `$` written `$$`) and
// written 0600 as <deploy_dir>/resolved/<sha>.yaml; every compose call runs that file alone
// (-f), with an empty --env-file beside it, in an environment the agent sets whole. Compose's
// resolved model is a fixed point: loaded again under any environment it is the same model.
//
// The resolved model lies outside releases/<sha> so that the release directory holds the
// bundle's files and `.env` alone: PROTOCOL.md §2's support one-liner recomputes the bundle
// sha there, and no container bind of the release can reach the model.

// ResolvedDirName is the directory of deploy_dir that holds the resolved models.
const ResolvedDirName = "resolved"

// EmptyEnvFile is the file of the resolved directory every compose call names as its
// --env-file: empty, so that compose reads no `.env` (the resolved model needs none).
const EmptyEnvFile = "empty.env"

// ModelPath is the resolved model of the release directory rel (<deploy_dir>/releases/<sha>):
// <deploy_dir>/resolved/<sha>.yaml.
func ModelPath(rel string) string {
	rel = filepath.Clean(rel)
	return filepath.Join(filepath.Dir(filepath.Dir(rel)), ResolvedDirName, filepath.Base(rel)+".yaml")
}

// EmptyEnvPath is the --env-file of every compose call for the release directory rel.
func EmptyEnvPath(rel string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(filepath.Clean(rel))), ResolvedDirName, EmptyEnvFile)
}

// Load loads the compose file of the release written at rel (an absolute directory, symlinks
// resolved) as compose would when handed `-f <rel>/<composeFile> --env-file <rel>/.env
// --project-directory <rel> -p <project>` in an empty environment: content is the compose
// file's verified bytes, env the rendered `.env`. Includes and extends are read from rel and
// may not leave it. env_file and label_file contents are not read yet (the policy decides on
// their paths first): Resolve reads them.
func Load(ctx context.Context, rel, composeFile string, content, env []byte, project string) (*types.Project, error) {
	quietLoader.Do(func() { logrus.SetOutput(io.Discard) }) // the loader's warnings are not ours to print
	vars, err := dotenv.UnmarshalBytesWithLookup(env, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(filepath.Base(rel), ".env"), err)
	}
	guard := &composeguard.Guard{}
	details := types.ConfigDetails{
		WorkingDir:  rel,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(rel, composeFile), Content: content}},
		Environment: types.Mapping(vars),
	}
	p, err := loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName(project, true)
		o.ResolvePaths = true
		o.SkipResolveEnvironment = true
		o.SkipResolveLabels = true
		o.ResourceLoaders = []loader.ResourceLoader{guard}
	})
	if refused := guard.Refused(); len(refused) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(refused, "; "))
	}
	if err != nil {
		return nil, fmt.Errorf("%s does not load: %s", composeFile, sanitize.Line(strings.ReplaceAll(err.Error(), rel+string(filepath.Separator), "")))
	}
	return p, nil
}

// Resolve is the model compose runs: p (as Load returned it and the policy passed it) with
// every env_file folded into its service's environment and label_file into its labels (both
// dropped), written as ResolvedYAML writes it — compose's own printing, every `$` of a
// value written `$$` and keys as they are, so that compose, reading it again, interpolates
// nothing and takes nothing from its environment. A model that would not load again as itself
// (an environment entry without a value, a key holding `$`, see Unstable) is an error.
//
// As for compose, a service of a profile compose is not asked for is not part of it, nor a
// network, volume, secret or config that no service it runs uses (the policy has decided on
// them all).
func Resolve(p *types.Project) ([]byte, error) {
	r, err := resolved(p)
	if err != nil {
		return nil, err
	}
	return ResolvedYAML(r)
}

// Printed is the resolved model of p as `docker compose config` prints it when it loads the
// file Resolve wrote: the bytes a test compares with compose's own.
func Printed(p *types.Project) ([]byte, error) {
	r, err := resolved(p)
	if err != nil {
		return nil, err
	}
	return PrintedYAML(r)
}

// resolved is p with env_file and label_file folded in and what compose does not run left out.
func resolved(p *types.Project) (*types.Project, error) {
	r, err := p.WithoutUnnecessaryResources().WithServicesEnvironmentResolved(true)
	if err != nil {
		return nil, err
	}
	return r.WithServicesLabelsResolved(true)
}
