package docker

import (
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/model"
)

// Model is the half of effects.Compose that prepares what compose runs, with no docker
// command: the release verified (VerifyRelease), its model resolved (Resolve), the registry
// credential written (WriteDockerConfigFS). CLI embeds it, and so may a stand-in for the CLI
// that runs no docker. A release's model is loaded only in a bounded loader child.
type Model struct{}

// VerifyRelease is VerifyRelease.
func (Model) VerifyRelease(op, rel string) error { return VerifyRelease(op, rel) }

// Resolve is model.Resolve.
func (Model) Resolve(p *types.Project) ([]byte, error) { return model.Resolve(p) }

// WriteDockerConfig is WriteDockerConfigFS.
func (Model) WriteDockerConfig(fsys files.FS, dir string, a RegistryAuth) error {
	return WriteDockerConfigFS(fsys, dir, a)
}
