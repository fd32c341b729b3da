package vocab_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// A cause travels typed (a Code and a Reason) from the effect that observed it; nothing
// decides a cause by reading the words the agent or another program wrote. TestNoCauseFromWords
// type-checks the non-test code of the packages that decide causes (nowordsScope) and follows
// every read of words — a Detail, Evidence or Fault field, an error's Error() or fmt.Sprint of
// an error — through local variables, closures, helpers' parameters and results and method
// values, to a decision: a matching call of strings, bytes, regexp or slices, a comparison, a
// switch on it, or a map looked up by it. A comparison with "" (are there words at all?) decides
// nothing. The few places that must read words are listed in wordReaders, each with why.
func TestNoCauseFromWords(t *testing.T) {
	pkgs := listPackages(t, nowordsScope...)
	var found []string
	for _, p := range pkgs {
		if !p.target {
			continue
		}
		for _, f := range analyze(t, p.ImportPath, p.Dir, p.GoFiles, pkgs) {
			if _, ok := wordReaders[f.where]; ok {
				continue
			}
			found = append(found, f.String())
		}
	}
	for _, f := range found {
		t.Errorf("a cause decided from words: %s", f)
	}
	// an exception no longer needed is removed
	seen := map[string]bool{}
	for _, p := range pkgs {
		if p.target {
			for _, f := range analyze(t, p.ImportPath, p.Dir, p.GoFiles, pkgs) {
				seen[f.where] = true
			}
		}
	}
	for w := range wordReaders {
		if !seen[w] {
			t.Errorf("wordReaders lists %s, which reads no words to decide: remove it", w)
		}
	}
}

// TestNoCauseFromWordsFindsEveryVariant runs the analysis over testdata/nowords: every way of
// deciding from words written there is found, and the ways of only writing words are not.
func TestNoCauseFromWordsFindsEveryVariant(t *testing.T) {
	dir := filepath.Join("testdata", "nowords")
	pkgs := listPackages(t, "strings", "bytes", "regexp", "fmt", "errors")
	got := map[string]bool{}
	for _, f := range analyze(t, "variants", dir, []string{"variants.go"}, pkgs) {
		got[f.fn] = true
	}
	want := []string{"decidesBytes", "decidesClosure", "decidesContains", "decidesErrorCompare", "decidesErrorText", "decidesIndex",
		"decidesLocal", "decidesMapLookup", "decidesMethodValue", "decidesRegexp", "decidesSwitch", "decidesSwitchTag", "decidesVar", "has"}
	for _, w := range want {
		if !got[w] {
			t.Errorf("%s decides from words and was not found", w)
		}
		delete(got, w)
	}
	for fn := range got {
		t.Errorf("%s was found, but decides nothing from words", fn)
	}
}

// nowordsScope are the packages whose non-test code must decide no cause from words: every
// package of the module (the effects that classify, the machine and its read model, the states
// that act on them, and the commands and tools around them).
var nowordsScope = []string{"./..."}

// wordReaders are the functions that must read words, by file:function, each with why. The
// test fails on one that no longer does.
var wordReaders = map[string]string{
	"effects/bao/bao.go:scrub":                     "masks a secret in an error's words before they leave: it looks for the secret, and decides no cause",
	"effects/tenancy/tenancy.go:transportErr":      "masks the token in a transport error's words before they leave: it looks for the secret, and decides no cause",
	"effects/tenancy/tenancy.go:decodeErrorBody":   "decodes tenancy's error body, whose JSON member is named detail (PROTOCOL.md §1): it reads the wire's shape (null or not), not words",
	"machine/tick.go:fold":                         "folds a tick whose entries equal the previous tick's, words included: it compares two records for sameness, and decides no cause",
	"machine/explain/render.go:writeTick":          "writes a journal line: puts the code in front unless the detail already starts with it",
	"machine/explain/why.go:sentence":              "writes words as a sentence: adds the full stop unless they end with one",
	"states/log.go:withCode":                       "writes a journal line: the same rule as explain's writeTick",
	"states/log.go:saidAlready":                    "writes a log line once: compares words with those already written this tick, and decides no cause",
	"states/heartbeat.go:firstLine":                "writes words cut at their first line break",
	"internal/model/compose.go:loadCompose":        "compose-go's loader fails untyped when it reaches a file the agent withheld from it (the .env of secrets): its words name the path, and no typed error does",
	"internal/bundle/envfile.go:dotenvProblem":     "compose-go's dotenv returns its line errors untyped (fmt.Errorf): their fixed words are kept without the template text they quote; its template errors are read by type",
	"cmd/monky-deployd/usage.go:flagErrorWords":    "rewrites the flag package's untyped usage errors into the usage line: it words a mistyped command, and decides no cause",
	"internal/bundlecheck/bundlecheck.go:findings": "prints a refusal's findings one a line as the policy wrote them: it formats words and decides nothing",
	"test/sim/fleet.go:fleetRowLocked":             "tenancy's side of the wire, simulated: it reads a report's detail (\"CODE: words\", PROTOCOL.md §1) as tenancy does",
}

// A finding is a decision from words at pos, in function fn of file (where is file:fn).
type finding struct {
	pos       token.Position
	fn, where string
	what      string
}

func (f finding) String() string { return fmt.Sprintf("%s (%s): %s", f.pos, f.fn, f.what) }

// listed is a package as go list -export describes it.
type listed struct {
	ImportPath, Dir, Export string
	GoFiles                 []string
	Standard                bool
	target                  bool
}

// listPackages lists patterns and their dependencies with their export data (building what is
// not in the build cache); the packages patterns name are the targets.
func listPackages(t *testing.T, patterns ...string) map[string]*listed {
	t.Helper()
	root := filepath.Join("..", "..")
	run := func(args ...string) []byte {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	pkgs := map[string]*listed{}
	dec := json.NewDecoder(bytes.NewReader(run(append([]string{"list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,Standard"}, patterns...)...)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = &p
	}
	for _, path := range strings.Fields(string(run(append([]string{"list"}, patterns...)...))) {
		if p, ok := pkgs[path]; ok && !p.Standard {
			p.target = true
		}
	}
	return pkgs
}

// analyze type-checks files of dir as package path (its imports read from their export data)
// and returns its decisions from words.
func analyze(t *testing.T, path, dir string, files []string, pkgs map[string]*listed) []finding {
	t.Helper()
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	lookup := func(p string) (io.ReadCloser, error) {
		l, ok := pkgs[p]
		if !ok || l.Export == "" {
			return nil, fmt.Errorf("no export data for %s", p)
		}
		return os.Open(l.Export)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{},
		Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	if _, err := conf.Check(path, fset, parsed, info); err != nil {
		t.Fatalf("type-check %s: %v", path, err)
	}
	a := &flow{info: info, tainted: map[types.Object]bool{}, deciderVar: map[types.Object]bool{},
		closures: map[types.Object]*ast.FuncLit{}, returns: map[string]bool{}}
	a.spread(parsed)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var out []finding
	for _, f := range parsed {
		name := fset.Position(f.Pos()).Filename
		rel := filepath.ToSlash(name)
		if r, err := filepath.Rel(root, name); err == nil && !strings.HasPrefix(r, "..") {
			rel = filepath.ToSlash(r)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			for _, s := range a.decisions(fn.Body) {
				out = append(out, finding{pos: fset.Position(s.pos), fn: fn.Name.Name, where: rel + ":" + fn.Name.Name, what: s.what})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pos.String() < out[j].pos.String() })
	return out
}

// flow is the analysis of one package: which variables hold words.
type flow struct {
	info *types.Info
	// tainted are the variables (locals, parameters) that hold words.
	tainted map[types.Object]bool
	// deciderVar are the variables that hold a deciding function (a method value).
	deciderVar map[types.Object]bool
	// closures are the variables that hold a function literal.
	closures map[types.Object]*ast.FuncLit
	// returns are the functions of the package (by full name) that return words.
	returns map[string]bool
}

// wordsType says whether a value of type t can carry words: a string, bytes, a list of strings.
func wordsType(t types.Type) bool {
	if t == nil {
		return false
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		return u.Info()&types.IsString != 0
	case *types.Slice:
		if b, ok := u.Elem().Underlying().(*types.Basic); ok {
			return b.Info()&types.IsString != 0 || b.Kind() == types.Byte || b.Kind() == types.Rune
		}
	}
	return false
}

var errorType = types.Universe.Lookup("error").Type().Underlying().(*types.Interface)

// wordFields are the fields that hold words another program or the agent wrote.
var wordFields = []string{"Detail", "Evidence", "Fault"}

// source says whether e reads words: a word field, an error's Error(), fmt.Sprint* of an error.
func (a *flow) source(e ast.Expr) bool {
	switch x := ast.Unparen(e).(type) {
	case *ast.SelectorExpr:
		if sel, ok := a.info.Selections[x]; ok && sel.Kind() == types.FieldVal && slices.Contains(wordFields, x.Sel.Name) {
			return true
		}
	case *ast.CallExpr:
		if sel, ok := ast.Unparen(x.Fun).(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" && len(x.Args) == 0 {
			if tv, ok := a.info.Types[sel.X]; ok && types.Implements(tv.Type, errorType) {
				return true
			}
		}
		if fn := a.callee(x); fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == "fmt" && strings.HasPrefix(fn.Name(), "Sprint") {
			for _, arg := range x.Args {
				if tv, ok := a.info.Types[arg]; ok && tv.Type != nil && types.Implements(tv.Type, errorType) {
					return true
				}
			}
		}
	}
	return false
}

// words says whether e holds words: it is of a words type and reads them, or is made of
// something that does.
func (a *flow) words(e ast.Expr) bool {
	if e == nil {
		return false
	}
	tv, ok := a.info.Types[e]
	if !ok || !wordsType(tv.Type) || tv.Value != nil {
		return false
	}
	if a.source(e) {
		return true
	}
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		return a.tainted[a.info.Uses[x]]
	case *ast.CallExpr:
		if fn := a.callee(x); fn != nil && a.returns[fn.FullName()] {
			return true
		}
		if obj := a.calleeVar(x); obj != nil && a.closures[obj] != nil && a.returns[litKey(a.closures[obj])] {
			return true
		}
		for _, arg := range x.Args {
			if a.words(arg) {
				return true
			}
		}
		if sel, ok := ast.Unparen(x.Fun).(*ast.SelectorExpr); ok {
			if _, isMethod := a.info.Selections[sel]; isMethod {
				return a.words(sel.X)
			}
		}
	case *ast.BinaryExpr:
		return a.words(x.X) || a.words(x.Y)
	case *ast.SliceExpr:
		return a.words(x.X)
	case *ast.IndexExpr:
		return a.words(x.X)
	case *ast.StarExpr:
		return a.words(x.X)
	case *ast.CompositeLit:
		for _, el := range x.Elts {
			if a.words(el) {
				return true
			}
		}
	}
	return false
}

// callee is the declared function or method a call calls, nil for any other.
func (a *flow) callee(c *ast.CallExpr) *types.Func {
	switch f := ast.Unparen(c.Fun).(type) {
	case *ast.Ident:
		fn, _ := a.info.Uses[f].(*types.Func)
		return fn
	case *ast.SelectorExpr:
		fn, _ := a.info.Uses[f.Sel].(*types.Func)
		return fn
	case *ast.IndexExpr: // a generic function instantiated
		if id, ok := f.X.(*ast.SelectorExpr); ok {
			fn, _ := a.info.Uses[id.Sel].(*types.Func)
			return fn
		}
	}
	return nil
}

// calleeVar is the variable a call calls through (a closure, a method value), nil otherwise.
func (a *flow) calleeVar(c *ast.CallExpr) types.Object {
	if id, ok := ast.Unparen(c.Fun).(*ast.Ident); ok {
		if v, ok := a.info.Uses[id].(*types.Var); ok {
			return v
		}
	}
	return nil
}

func litKey(l *ast.FuncLit) string { return fmt.Sprintf("lit@%d", l.Pos()) }

// deciders are the functions that decide from a string's words, by package.
var deciders = map[string][]string{
	"strings": {"Contains", "ContainsAny", "ContainsRune", "ContainsFunc", "HasPrefix", "HasSuffix", "Index", "IndexAny", "IndexByte",
		"IndexFunc", "IndexRune", "LastIndex", "LastIndexAny", "LastIndexByte", "LastIndexFunc", "Count", "EqualFold", "Cut", "CutPrefix", "CutSuffix", "Compare"},
	"bytes":  {"Contains", "ContainsAny", "ContainsRune", "ContainsFunc", "HasPrefix", "HasSuffix", "Index", "IndexAny", "IndexByte", "IndexFunc", "IndexRune", "LastIndex", "Count", "EqualFold", "Equal", "Cut", "CutPrefix", "CutSuffix", "Compare"},
	"regexp": {"Match", "MatchString", "MatchReader", "Find", "FindIndex", "FindString", "FindStringIndex", "FindStringSubmatch", "FindStringSubmatchIndex", "FindSubmatch", "FindAll", "FindAllString", "FindAllStringSubmatch", "FindAllStringIndex"},
	"slices": {"Contains", "Index"},
}

// decider says whether fn decides from words.
func decider(fn *types.Func) bool {
	return fn != nil && fn.Pkg() != nil && slices.Contains(deciders[fn.Pkg().Path()], fn.Name())
}

// deciderRef says whether e names a deciding function as a value (`strings.Contains`,
// `re.MatchString`).
func (a *flow) deciderRef(e ast.Expr) bool {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		fn, _ := a.info.Uses[x].(*types.Func)
		return decider(fn) || a.deciderVar[a.info.Uses[x]]
	case *ast.SelectorExpr:
		fn, _ := a.info.Uses[x.Sel].(*types.Func)
		return decider(fn)
	}
	return false
}

// spread marks what holds words, until nothing changes: variables assigned words, parameters
// passed words (of the package's functions and closures), functions that return words,
// variables that hold a deciding function or a closure.
func (a *flow) spread(files []*ast.File) {
	decls := map[string]*ast.FuncDecl{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok {
				if obj, ok := a.info.Defs[fn.Name].(*types.Func); ok {
					decls[obj.FullName()] = fn
				}
			}
		}
	}
	mark := func(id *ast.Ident) bool {
		obj := a.info.Defs[id]
		if obj == nil {
			obj = a.info.Uses[id]
		}
		if obj == nil || id.Name == "_" || a.tainted[obj] || !wordsType(obj.Type()) {
			return false
		}
		a.tainted[obj] = true
		return true
	}
	params := func(ft *ast.FuncType, args []ast.Expr) bool {
		changed := false
		var names []*ast.Ident
		for _, f := range ft.Params.List {
			if len(f.Names) == 0 {
				names = append(names, nil)
			}
			names = append(names, f.Names...)
		}
		for i, arg := range args {
			k := min(i, len(names)-1)
			if k >= 0 && names[k] != nil && a.words(arg) && mark(names[k]) {
				changed = true
			}
		}
		return changed
	}
	returnsWords := func(body *ast.BlockStmt) bool {
		hit := false
		ast.Inspect(body, func(n ast.Node) bool {
			if _, ok := n.(*ast.FuncLit); ok {
				return false
			}
			if r, ok := n.(*ast.ReturnStmt); ok {
				for _, e := range r.Results {
					hit = hit || a.words(e)
				}
			}
			return !hit
		})
		return hit
	}
	for changed := true; changed; {
		changed = false
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.AssignStmt:
					for i, l := range x.Lhs {
						id, ok := l.(*ast.Ident)
						if !ok {
							continue
						}
						rhs := x.Rhs[0]
						if len(x.Rhs) == len(x.Lhs) {
							rhs = x.Rhs[i]
						}
						changed = a.assign(id, rhs, mark) || changed
					}
				case *ast.ValueSpec:
					for i, id := range x.Names {
						if i < len(x.Values) {
							changed = a.assign(id, x.Values[i], mark) || changed
						}
					}
				case *ast.RangeStmt:
					if a.words(x.X) {
						if id, ok := x.Value.(*ast.Ident); ok {
							changed = mark(id) || changed
						}
					}
				case *ast.CallExpr:
					if fn := a.callee(x); fn != nil {
						if d := decls[fn.FullName()]; d != nil {
							changed = params(d.Type, x.Args) || changed
						}
					} else if v := a.calleeVar(x); v != nil && a.closures[v] != nil {
						changed = params(a.closures[v].Type, x.Args) || changed
					}
				case *ast.FuncDecl:
					if obj, ok := a.info.Defs[x.Name].(*types.Func); ok && x.Body != nil && !a.returns[obj.FullName()] && returnsWords(x.Body) {
						a.returns[obj.FullName()], changed = true, true
					}
				case *ast.FuncLit:
					if k := litKey(x); !a.returns[k] && returnsWords(x.Body) {
						a.returns[k], changed = true, true
					}
				}
				return true
			})
		}
	}
}

// assign marks what id holds once assigned rhs.
func (a *flow) assign(id *ast.Ident, rhs ast.Expr, mark func(*ast.Ident) bool) bool {
	obj := a.info.Defs[id]
	if obj == nil {
		obj = a.info.Uses[id]
	}
	if obj == nil {
		return false
	}
	if lit, ok := ast.Unparen(rhs).(*ast.FuncLit); ok && a.closures[obj] == nil {
		a.closures[obj] = lit
		return true
	}
	if a.deciderRef(rhs) && !a.deciderVar[obj] {
		a.deciderVar[obj] = true
		return true
	}
	return a.words(rhs) && mark(id)
}

type decision struct {
	pos  token.Pos
	what string
}

// decisions are the places in body that decide from words.
func (a *flow) decisions(body *ast.BlockStmt) []decision {
	var out []decision
	add := func(n ast.Node, what string) { out = append(out, decision{n.Pos(), what}) }
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			deciding := a.deciderRef(x.Fun)
			if !deciding {
				deciding = decider(a.callee(x))
			}
			if deciding {
				for _, arg := range x.Args {
					if a.words(arg) {
						add(x, "a match over words")
						break
					}
				}
			}
		case *ast.BinaryExpr:
			switch x.Op {
			case token.EQL, token.NEQ, token.LSS, token.GTR, token.LEQ, token.GEQ:
				if (a.words(x.X) && !a.empty(x.Y)) || (a.words(x.Y) && !a.empty(x.X)) {
					add(x, "a comparison of words")
				}
			}
		case *ast.SwitchStmt:
			if a.words(x.Tag) {
				add(x, "a switch on words")
			}
		case *ast.IndexExpr:
			if tv, ok := a.info.Types[x.X]; ok {
				if _, isMap := tv.Type.Underlying().(*types.Map); isMap && a.words(x.Index) {
					add(x, "a map looked up by words")
				}
			}
		}
		return true
	})
	return out
}

// empty says whether e is the empty string or nil: asking whether there are words decides
// nothing.
func (a *flow) empty(e ast.Expr) bool {
	tv, ok := a.info.Types[e]
	return ok && (tv.IsNil() || tv.Value != nil && tv.Value.Kind() == constant.String && constant.StringVal(tv.Value) == "")
}
