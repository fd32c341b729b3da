package vocab_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A cause travels typed (a Code and a Reason) from the effect that observed it; nothing
// decides a cause by reading the words the agent wrote. TestNoCauseFromWords walks every
// non-test Go file of the module and fails on a call that decides from a detail, an evidence
// or a fault string: strings.Contains, HasPrefix, Index… or a regexp over one of them (or over
// a variable made from one). The places that write the words are the only exceptions, listed
// in wordWriters with why.
func TestNoCauseFromWords(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			where := filepath.ToSlash(rel) + ":" + fn.Name.Name
			if _, ok := wordWriters[where]; ok {
				continue
			}
			for _, pos := range wordDecisions(fn) {
				found = append(found, fset.Position(pos).String()+" ("+fn.Name.Name+")")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("a cause decided from words: %s", f)
	}
}

// wordWriters are the functions that write a detail and may look at what they write, by
// file:function, each with why.
var wordWriters = map[string]string{
	"states/log.go:withCode":                       "writes a journal line: puts the code in front unless the detail already starts with it",
	"machine/explain/render.go:writeTick":          "writes a journal line: the same rule as states' withCode",
	"internal/bundlecheck/bundlecheck.go:findings": "prints a refusal's findings one a line as the policy wrote them: it formats words and decides nothing",
	"test/sim/fleet.go:fleetRowLocked":             "tenancy's side of the wire, simulated: it reads a report's detail (\"CODE: words\", PROTOCOL.md §1) as tenancy does",
	"test/hostile/hostile.go:Names":                "a test fixture, not in the binary: the tests' assertion that a refusal named the bound its cost class meets",
}

// deciders are the calls that decide from the words of a string.
var deciders = map[string][]string{
	"strings": {"Contains", "ContainsAny", "ContainsRune", "ContainsFunc", "HasPrefix", "HasSuffix", "Index", "IndexAny", "IndexByte", "IndexRune", "LastIndex", "Count", "EqualFold", "Cut", "CutPrefix", "CutSuffix"},
	"bytes":   {"Contains", "HasPrefix", "HasSuffix", "Index"},
	"regexp":  {"MatchString"},
}

// regexpMethods are a compiled pattern's methods that read a string.
var regexpMethods = []string{"MatchString", "FindString", "FindStringIndex", "FindStringSubmatch", "FindStringSubmatchIndex", "FindAllString", "FindAllStringSubmatch", "ReplaceAllString"}

// wordNames are what the record's and a why's words are called.
func wordName(name string) bool {
	n := strings.ToLower(name)
	return n == "detail" || n == "evidence" || n == "fault"
}

// wordDecisions are the positions in fn of a decider called over words: a Detail, Evidence
// or Fault field, a variable or parameter so named, or a variable assigned from one of them.
func wordDecisions(fn *ast.FuncDecl) []token.Pos {
	tainted := map[string]bool{}
	if fn.Type.Params != nil {
		for _, p := range fn.Type.Params.List {
			for _, n := range p.Names {
				if wordName(n.Name) {
					tainted[n.Name] = true
				}
			}
		}
	}
	mentions := func(e ast.Expr) bool {
		hit := false
		ast.Inspect(e, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if wordName(x.Sel.Name) {
					hit = true
				}
			case *ast.Ident:
				if wordName(x.Name) || tainted[x.Name] {
					hit = true
				}
			}
			return !hit
		})
		return hit
	}
	// taint spreads through assignments until nothing changes
	for changed := true; changed; {
		changed = false
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if r, ok := n.(*ast.RangeStmt); ok && mentions(r.X) {
				for _, v := range []ast.Expr{r.Key, r.Value} {
					if id, ok := v.(*ast.Ident); ok && id.Name != "_" && !tainted[id.Name] {
						tainted[id.Name], changed = true, true
					}
				}
			}
			as, ok := n.(*ast.AssignStmt)
			if !ok {
				return true
			}
			for i, l := range as.Lhs {
				id, ok := l.(*ast.Ident)
				if !ok || tainted[id.Name] || id.Name == "_" {
					continue
				}
				rhs := as.Rhs[0]
				if len(as.Rhs) == len(as.Lhs) {
					rhs = as.Rhs[i]
				}
				if mentions(rhs) {
					tainted[id.Name], changed = true, true
				}
			}
			return true
		})
	}
	var out []token.Pos
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		decides := false
		if pkg, ok := sel.X.(*ast.Ident); ok && slices.Contains(deciders[pkg.Name], sel.Sel.Name) {
			decides = true
		} else if slices.Contains(regexpMethods, sel.Sel.Name) {
			decides = true
		}
		if !decides {
			return true
		}
		for _, a := range call.Args {
			if mentions(a) {
				out = append(out, call.Pos())
				break
			}
		}
		return true
	})
	return out
}
