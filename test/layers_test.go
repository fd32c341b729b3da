// Package test holds the suites that are not unit tests (in its folders) and, here, the test
// that keeps the project's folders in layers.
package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tikali/monky-deployd"

// layers is the project's folders from the bottom up, written once: a package may import its
// own folder's packages and those of the folders below its own, never one above. internal/ holds
// the libraries; store, transport and effects are the agent's outside world; machine is the
// state machine with its read model (machine/explain, machine/metrics); states drives it; test/
// holds the simulator and the docker stub besides the suites; cmd/ the programs; packaging's Go
// package only tests the package's files.
var layers = []string{"internal", "store", "transport", "effects", "machine", "states", "test", "cmd", "packaging"}

// testTools is the one folder a package's tests may reach above their own: the simulator and the
// docker stub the unit tests run against.
const testTools = "test"

type pkg struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
}

// layer is the folder a project path sits in, and that folder's rank in layers (-1: none).
func layer(path string) (string, int) {
	rel, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return "", -1
	}
	top, _, _ := strings.Cut(rel, "/")
	return top, slices.Index(layers, top)
}

// climbs lists every import of p that runs back up: to a folder above p's own, or, from p's
// tests, above it and outside testTools.
func climbs(p pkg) []string {
	from, rank := layer(p.ImportPath)
	var out []string
	check := func(imports []string, tests bool) {
		for _, imp := range imports {
			to, r := layer(imp)
			if r <= rank || tests && to == testTools {
				continue
			}
			what := "imports"
			if tests {
				what = "tests import"
			}
			out = append(out, p.ImportPath+" ("+from+") "+what+" "+imp+" ("+to+")")
		}
	}
	check(p.Imports, false)
	check(append(p.TestImports, p.XTestImports...), true)
	return out
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestLayers: no import among the project's folders runs back up, and every package sits in
// a folder of layers.
func TestLayers(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the project has more", len(pkgs))
	}
	for _, p := range pkgs {
		if top, r := layer(p.ImportPath); r < 0 {
			t.Errorf("%s sits in %q, a folder the layers do not name", p.ImportPath, top)
		}
		for _, c := range climbs(p) {
			t.Error(c)
		}
	}
}

// TestClimbsFound: the check sees an import that runs back up, and lets tests reach testTools.
func TestClimbsFound(t *testing.T) {
	up := pkg{ImportPath: module + "/transport", Imports: []string{"net", module + "/internal/config", module + "/effects"}}
	if got := climbs(up); len(got) != 1 || !strings.Contains(got[0], "imports "+module+"/effects (effects)") {
		t.Fatalf("climbs = %q", got)
	}
	tools := pkg{ImportPath: module + "/states", XTestImports: []string{module + "/test/sim", module + "/states"}}
	if got := climbs(tools); len(got) != 0 {
		t.Fatalf("a test's use of the simulator counted as a climb: %q", got)
	}
	if got := climbs(pkg{ImportPath: module + "/states", TestImports: []string{module + "/cmd/monky-deployd"}}); len(got) != 1 {
		t.Fatalf("a test's import of cmd not counted: %q", got)
	}
}
