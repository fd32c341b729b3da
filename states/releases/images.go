package releases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/distribution/reference"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/machine"
)

// ModelLoader loads a release's compose model as compose runs it (effects.Compose's Load).
type ModelLoader interface {
	Load(ctx context.Context, rel, composeFile string, content, env []byte, project string) (*types.Project, error)
}

// ReleaseImages is every image the release written at dir names: its compose file
// (bundle.json's compose_file, default compose.yaml) loaded by m with the release's `.env`, as
// compose runs it, services of every profile included.
func ReleaseImages(ctx context.Context, m ModelLoader, dir, project string) ([]reference.Named, error) {
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
	p, err := m.Load(ctx, rel, composeFile, content, env, project)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", short, err)
	}
	return modelImages(p, short)
}

// modelImages is the image of every service of p, of every profile, parsed as docker does.
func modelImages(p *types.Project, short string) ([]reference.Named, error) {
	var names []string
	images := map[string]string{}
	for _, ss := range []types.Services{p.Services, p.DisabledServices} {
		for name, s := range ss {
			if s.Image != "" {
				names = append(names, name)
				images[name] = s.Image
			}
		}
	}
	sort.Strings(names)
	out := make([]reference.Named, 0, len(names))
	for _, name := range names {
		n, err := reference.ParseNormalizedNamed(images[name])
		if err != nil {
			return nil, fmt.Errorf("release %s: service %s: image %q: %w", short, name, images[name], err)
		}
		out = append(out, n)
	}
	return out, nil
}
