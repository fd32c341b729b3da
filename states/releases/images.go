package releases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/distribution/reference"

	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/machine"
)

// The images a kept release names are read from its compose model, loaded like every model of a
// release in a loader child the operating system bounds (internal/model's one op): a release
// applied before the bounds existed, or one whose cost grew with a compose upgrade, can cost a
// prune no more than it may cost a check. The child answers each service's image; the parent
// parses them.

// ReleaseImages is every image the release written at dir names: its compose file
// (bundle.json's compose_file, default compose.yaml) loaded with the release's `.env`, as
// compose runs it, services of every profile included, in a bounded loader child. A model that
// does not load, or one past the child's budget, is an error: the prune removes nothing on a
// guess.
func ReleaseImages(ctx context.Context, dir, project string) ([]reference.Named, error) {
	short := machine.ShortSha(filepath.Base(dir))
	composeFile := "compose.yaml"
	if b, err := os.ReadFile(filepath.Join(dir, bundle.MetaFile)); err == nil {
		var m struct {
			ComposeFile string `json:"compose_file"`
		}
		if json.Unmarshal(b, &m) == nil && m.ComposeFile != "" {
			composeFile = m.ComposeFile
		}
	}
	composeFile = filepath.Clean("/" + composeFile)[1:]
	content, err := os.ReadFile(filepath.Join(dir, composeFile))
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", short, err)
	}
	env, err := os.ReadFile(filepath.Join(dir, ".env"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("release %s: %w", short, err)
	}
	defer clear(env)
	rel, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", short, err)
	}
	ans, err := model.Run(ctx, model.Request{Want: model.WantImages, Rel: rel, ComposeFile: composeFile, Content: content, Env: env, Project: project})
	var over *budget.Exceeded
	switch {
	case errors.As(err, &over):
		return nil, fmt.Errorf("release %s: %s: %s, a bound for loading a release's model (docs/SECURITY.md)", short, composeFile, over.Words)
	case err != nil:
		return nil, fmt.Errorf("release %s: %s does not load: %w", short, composeFile, err)
	case ans.Code != "":
		return nil, fmt.Errorf("release %s: %s", short, ans.Detail)
	}
	return parseImages(ans.Images, short)
}

// parseImages parses each service's image as docker does.
func parseImages(images []model.ServiceImage, short string) ([]reference.Named, error) {
	out := make([]reference.Named, 0, len(images))
	for _, si := range images {
		n, err := reference.ParseNormalizedNamed(si.Image)
		if err != nil {
			return nil, fmt.Errorf("release %s: service %s: image %q: %w", short, si.Service, si.Image, err)
		}
		out = append(out, n)
	}
	return out, nil
}
