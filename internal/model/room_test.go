package model

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStatesReachDockerOnlyThroughEffects (issue 47): the steps reach docker only through the
// effects interfaces and the compose model only through this package: no non-test file of
// states (or a package under it) imports the concrete effects/docker.
func TestStatesReachDockerOnlyThroughEffects(t *testing.T) {
	const forbidden = "github.com/tikali/monky-deployd/effects/docker"
	root := filepath.Join("..", "..", "states")
	seen := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		seen++
		for _, im := range f.Imports {
			if path, _ := strconv.Unquote(im.Path.Value); path == forbidden {
				t.Errorf("%s imports %s: reach it through effects (and the model through internal/model)", p, forbidden)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 20 {
		t.Fatalf("read %d files of states, want the package's", seen)
	}
}
