package test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// heavyCall is a test's testkit.Heavy call: the make target that runs it in full.
var heavyCall = regexp.MustCompile(`testkit\.Heavy\(t, "make ([a-z-]+)"`)

var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(`)

// heavyTests finds every test that marks itself heavy: its package folder, name and target.
func heavyTests(t *testing.T, root string) []struct{ dir, name, target string } {
	var out []struct{ dir, name, target string }
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && p != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		funcs := testFunc.FindAllSubmatchIndex(b, -1)
		for _, m := range heavyCall.FindAllSubmatchIndex(b, -1) {
			name := ""
			for _, f := range funcs {
				if f[0] < m[0] {
					name = string(b[f[2]:f[3]])
				}
			}
			if name == "" {
				t.Errorf("%s: a testkit.Heavy call outside a Test function", p)
				continue
			}
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			out = append(out, struct{ dir, name, target string }{rel, name, string(b[m[2]:m[3]])})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// makeVar is the value of a Makefile variable written NAME := a \ b \ c.
func makeVar(mk, name string) []string {
	m := regexp.MustCompile(`(?m)^` + name + ` :=((?:[^\n]*\\\n)*[^\n]*)`).FindStringSubmatch(mk)
	if m == nil {
		return nil
	}
	return strings.Fields(strings.NewReplacer("\\\n", " ", "|", " ").Replace(m[1]))
}

// recipe is the text of a make target's recipe: its lines from "target:" to the next blank line.
func recipe(mk, target string) string {
	i := strings.Index(mk, "\n"+target+":")
	if i < 0 {
		return ""
	}
	rest := mk[i+1:]
	if j := strings.Index(rest, "\n\n"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// TestEveryHeavyTestRunsInCI: the quick tier (`make test`, go test -short) skips a heavy test, so
// each must be run by the target it names, in full, and .ci/run must run that target: `make
// test-heavy` by the Makefile's HEAVY_TESTS (its package in HEAVY_PKGS), a suite's own target by
// its recipe. Nothing the quick tier leaves out is dropped from CI.
func TestEveryHeavyTestRunsInCI(t *testing.T) {
	root := ".."
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mk := read("Makefile")
	for _, m := range []string{"test/robust.mk", "test/e2e.mk", "test/systemd.mk", "test/bench.mk"} {
		mk += "\n" + read(m)
	}
	ci := read(".ci/run")
	listed, pkgs := makeVar(mk, "HEAVY_TESTS"), makeVar(mk, "HEAVY_PKGS")
	if len(listed) == 0 || len(pkgs) == 0 {
		t.Fatal("the Makefile names no HEAVY_TESTS or HEAVY_PKGS")
	}
	found := heavyTests(t, root)
	if len(found) < len(listed) {
		t.Fatalf("%d heavy tests found, fewer than the %d HEAVY_TESTS: the search is broken", len(found), len(listed))
	}
	var mine []string
	for _, h := range found {
		if !strings.Contains(ci, "make "+h.target) && !strings.Contains(ci, "stage "+h.target) {
			t.Errorf("%s (%s) is run by make %s, which .ci/run does not run", h.name, h.dir, h.target)
		}
		if h.target != "test-heavy" {
			if !strings.Contains(recipe(mk, h.target), h.name) {
				t.Errorf("%s (%s) names make %s, whose recipe does not run it", h.name, h.dir, h.target)
			}
			continue
		}
		mine = append(mine, h.name)
		if !slices.Contains(listed, h.name) {
			t.Errorf("%s (%s) is heavy but not in the Makefile's HEAVY_TESTS", h.name, h.dir)
		}
		if !slices.Contains(pkgs, "./"+h.dir) {
			t.Errorf("%s: its package ./%s is not in HEAVY_PKGS", h.name, h.dir)
		}
	}
	for _, n := range listed {
		if !slices.Contains(mine, n) {
			t.Errorf("HEAVY_TESTS names %s, which marks itself heavy nowhere", n)
		}
	}
}
