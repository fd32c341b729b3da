package states_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/machine"
)

// noteConsts reads machine/vocab.go: each Note… constant's name and value.
func noteConsts(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "machine", "vocab.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Note") {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			out[vs.Names[0].Name], _ = strconv.Unquote(lit.Value)
		}
		return true
	})
	return out
}

// TestEveryNoteIsOfTheVocabulary: every journal note a state writes names its event by a
// machine.Note… constant, never by a string of its own, and every such constant is in
// machine.Notes (which docs/JOURNAL.md lists, TestJournalDocMatches): a support engineer never
// meets an event that explain, the logs' levels and the docs do not know.
func TestEveryNoteIsOfTheVocabulary(t *testing.T) {
	consts := noteConsts(t)
	if len(consts) == 0 {
		t.Fatal("no Note constants found in machine/vocab.go")
	}
	for name, v := range consts {
		if !slices.Contains(machine.Notes, v) {
			t.Errorf("machine.%s = %q is not in machine.Notes", name, v)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			fn, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (fn.Sel.Name != "Note" && fn.Sel.Name != "noteStop") {
				return true
			}
			calls++
			switch arg := call.Args[0].(type) {
			case *ast.SelectorExpr:
				if pkg, ok := arg.X.(*ast.Ident); ok && pkg.Name == "machine" {
					if _, known := consts[arg.Sel.Name]; known {
						return true
					}
				}
			case *ast.Ident:
				return true // a parameter handed on (noteStop's event): its callers are checked
			}
			t.Errorf("%s: %s's event is not a machine.Note… constant", fset.Position(call.Pos()), fn.Sel.Name)
			return true
		})
	}
	if calls < 10 {
		t.Fatalf("found %d note calls in states: the check reads the wrong files", calls)
	}
}
