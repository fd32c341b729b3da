// Package composeguard keeps compose's loader inside a release directory: a Guard is the
// loader's first resource loader and refuses every include or extends path that would lead out
// of the release — absolute, climbing with `..`, or remote (`git@…:`, `oci://`, `https://`) —
// before anything is read. Clean relative paths are left to compose-go's own local loader,
// which resolves them below the including file's directory. The package reads no file and
// holds nothing but what a Guard refused.
package composeguard

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tikali/monky-deployd/internal/sanitize"
)

// A Guard is a compose-go loader.ResourceLoader; Refused lists what it refused, in words.
type Guard struct {
	mu      sync.Mutex
	refused []string
}

// Accept takes every path that would lead out of the release directory.
func (g *Guard) Accept(p string) bool {
	if filepath.IsAbs(p) || strings.Contains(p, ":") || strings.HasPrefix(p, "~") {
		return true
	}
	for _, seg := range strings.Split(filepath.ToSlash(p), "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// Load refuses p: it is recorded and nothing is read.
func (g *Guard) Load(_ context.Context, p string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refused = append(g.refused, "include or extends file "+sanitize.Line(p)+" lies outside the release directory")
	return "", fmt.Errorf("%s: outside the release directory", p)
}

// Dir is p's directory.
func (g *Guard) Dir(p string) string { return filepath.Dir(p) }

// Refused lists the paths refused so far, in words.
func (g *Guard) Refused() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.refused...)
}
