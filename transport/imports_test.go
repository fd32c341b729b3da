package transport

import (
	"go/build"
	"strings"
	"testing"
)

// TestImportsNothingAbove: transport sits below effects; it never imports effects or any of
// effects' packages (an import running back up): effects classifies what transport returns.
func TestImportsNothingAbove(t *testing.T) {
	p, err := build.Default.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range append(p.Imports, p.TestImports...) {
		if imp == "github.com/tikali/monky-deployd/effects" || strings.HasPrefix(imp, "github.com/tikali/monky-deployd/effects/") {
			t.Errorf("transport imports %s", imp)
		}
	}
	if len(p.Imports) == 0 {
		t.Fatal("no imports read")
	}
}
