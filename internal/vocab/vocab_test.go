package vocab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// consts type-checks this package and returns every constant of type Code, by value.
func consts(t *testing.T) map[Code]string {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	names, _ := filepath.Glob("*.go")
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("vocab", fset, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	code := pkg.Scope().Lookup("Code").Type()
	out := map[Code]string{}
	for _, name := range pkg.Scope().Names() {
		c, ok := pkg.Scope().Lookup(name).(*types.Const)
		if !ok || !types.Identical(c.Type(), code) {
			continue
		}
		v := Code(strings.Trim(c.Val().ExactString(), `"`))
		if other, dup := out[v]; dup {
			t.Errorf("%s and %s both spell %s", other, name, v)
		}
		out[v] = name
	}
	return out
}

var shape = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)

// TestEveryCodeHasARow: every constant of type Code has a row in the registry, with a kind, a
// fault and a fix, and every row is a constant's; no two constants spell one code.
func TestEveryCodeHasARow(t *testing.T) {
	cs := consts(t)
	if len(cs) < 40 {
		t.Fatalf("found %d constants of type Code: the reader misses them", len(cs))
	}
	for v, name := range cs {
		c, ok := CauseOf(v)
		switch {
		case !ok:
			t.Errorf("%s (%s) has no row in the registry of causes", name, v)
		case c.Kind < KindRefusal || c.Kind > KindFinding || c.Fault == "" || c.Fix == "":
			t.Errorf("%s (%s): row %+v lacks a kind, a fault or a fix", name, v, c)
		case strings.HasSuffix(c.Fault, "."):
			t.Errorf("%s: the fault ends with a full stop; explain adds it", name)
		}
		if !shape.MatchString(string(v)) {
			t.Errorf("%s = %q is not spelled like a code", name, v)
		}
	}
	for _, v := range Codes() {
		if _, ok := cs[v]; !ok {
			t.Errorf("the registry's row %s is no constant's", v)
		}
	}
}

// TestOneDefinitionPerCode: outside this package, no Go source of the agent spells a code of the
// vocabulary as a literal: it names the constant, so a typo does not compile and a code is
// defined once. Tests, which write what they expect, and the programs under test/ (the
// simulator plays tenancy and OpenBao and speaks their codes), may.
func TestOneDefinitionPerCode(t *testing.T) {
	cs := consts(t)
	root := filepath.Join("..", "..")
	lit := regexp.MustCompile(`"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*"`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case ".git", "testdata", "test", filepath.Join("internal", "vocab"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range lit.FindAllString(line, -1) {
				if name, ok := cs[Code(strings.Trim(m, `"`))]; ok {
					t.Errorf("%s:%d spells %s: name vocab.%s", rel, i+1, m, name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoCodeIsALiteral: no Go source of the agent outside this package hands a string literal
// where a Code goes (a code of its own made up on the spot, with no row), whatever its spelling:
// the agent's packages are type-checked against the export data `go list -export` gives, and
// every constant whose type is Code must name one of this package's constants. The programs
// under test/ (the simulator speaks tenancy's own codes) may.
func TestNoCodeIsALiteral(t *testing.T) {
	const module = "github.com/tikali/monky-deployd"
	cmd := exec.Command("go", "list", "-export", "-deps", "-json", "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath, Dir, Export string
		GoFiles                 []string
	}
	exports := map[string]string{}
	var ours []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if strings.HasPrefix(p.ImportPath, module+"/") && !strings.HasPrefix(p.ImportPath, module+"/test/") &&
			p.ImportPath != module+"/internal/vocab" {
			ours = append(ours, p)
		}
	}
	if len(ours) < 20 {
		t.Fatalf("go list named %d of the agent's packages: the reader misses them", len(ours))
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	checked := 0
	for _, p := range ours {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
		if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("%s: %v", p.ImportPath, err)
		}
		for e, tv := range info.Types {
			named, ok := tv.Type.(*types.Named)
			if tv.Value == nil || !ok || named.Obj().Name() != "Code" || named.Obj().Pkg() == nil || named.Obj().Pkg().Path() != module+"/internal/vocab" {
				continue
			}
			checked++
			if lit, ok := e.(*ast.BasicLit); ok && lit.Value != `""` {
				t.Errorf("%s: the code %s is a literal: name a constant of internal/vocab (with its row)", fset.Position(lit.Pos()), lit.Value)
			}
		}
	}
	if checked < 100 {
		t.Errorf("found %d constants of type Code in the agent's packages: the reader misses them", checked)
	}
}
