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

	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/machine"
)

// The images a kept release names are read from its compose model, loaded like every model of a
// release in a loader child the operating system bounds (internal/budget): a release applied
// before the bounds existed, or one whose cost grew with a compose upgrade, can cost a prune no
// more than it may cost a check. The child answers each service's image; the parent parses them.

// imagesOp is the child's op name (budget.Serve); imagesVersion the version of its request and
// answer.
const (
	imagesOp      = "release-images"
	imagesVersion = 1
)

type imagesRequest struct {
	V           int    `json:"v"`
	Rel         string `json:"rel"`
	ComposeFile string `json:"compose_file"`
	Content     []byte `json:"content"`
	Env         []byte `json:"env"`
	Project     string `json:"project"`
}

type imagesAnswer struct {
	V     int    `json:"v"`
	Error string `json:"error,omitempty"` // the model does not load
	// Images is each service's image, of every profile, in the services' name order.
	Images []serviceImage `json:"images,omitempty"`
}

type serviceImage struct {
	Service string `json:"service"`
	Image   string `json:"image"`
}

func init() { budget.Serve(imagesOp, serveImages) }

// serveImages is the child: load the model as compose runs it and list its images.
func serveImages(raw []byte) ([]byte, error) {
	var req imagesRequest
	if err := budget.Decode(raw, &req, imagesVersion); err != nil {
		return nil, err
	}
	ans := imagesAnswer{V: imagesVersion}
	p, err := docker.Load(context.Background(), req.Rel, req.ComposeFile, req.Content, req.Env, req.Project)
	if err != nil {
		ans.Error = err.Error()
	} else {
		ans.Images = modelImages(p)
	}
	return json.Marshal(ans)
}

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
	req, err := json.Marshal(imagesRequest{V: imagesVersion, Rel: rel, ComposeFile: composeFile, Content: content, Env: env, Project: project})
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", short, err)
	}
	defer clear(req)
	out, err := budget.Run(ctx, imagesOp, req)
	var over *budget.Exceeded
	switch {
	case errors.As(err, &over):
		return nil, fmt.Errorf("release %s: %s: %s, a bound for loading a release's model (docs/SECURITY.md)", short, composeFile, over.Words)
	case err != nil:
		return nil, fmt.Errorf("release %s: %s does not load: %w", short, composeFile, err)
	}
	var ans imagesAnswer
	if err := json.Unmarshal(out, &ans); err != nil || ans.V != imagesVersion {
		return nil, fmt.Errorf("release %s: %s does not load: the loader's answer does not read", short, composeFile)
	}
	if ans.Error != "" {
		return nil, fmt.Errorf("release %s: %s", short, ans.Error)
	}
	return parseImages(ans.Images, short)
}

// modelImages is the image of every service of p that names one, of every profile, in the
// services' name order.
func modelImages(p *types.Project) []serviceImage {
	var out []serviceImage
	for _, ss := range []types.Services{p.Services, p.DisabledServices} {
		for name, s := range ss {
			if s.Image != "" {
				out = append(out, serviceImage{Service: name, Image: s.Image})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Service < out[j].Service })
	return out
}

// parseImages parses each service's image as docker does.
func parseImages(images []serviceImage, short string) ([]reference.Named, error) {
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
