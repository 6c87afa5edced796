package scheduler_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoFilesCallingBothWays: no two files of the package use each other's top-level
// functions, methods or variables. A file that calls into another which calls back is one
// concept split in two, or two concepts tangled: merge them, or move what both need to one
// side. (Types and constants do not count: a file may use another's types while that file
// calls it.)
func TestNoFilesCallingBothWays(t *testing.T) {
	uses, err := crossFileUses(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bothWays(uses) {
		t.Errorf("%s and %s call into each other: %s uses %s; %s uses %s", p.a, p.b,
			p.a, strings.Join(uses[p.a][p.b], ", "), p.b, strings.Join(uses[p.b][p.a], ", "))
	}
}

// TestBothWays: the checker finds a pair of files calling each other, and only such pairs.
func TestBothWays(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.go": "package p\n\nfunc A() { B() }\n\nvar V = 1\n",
		"b.go": "package p\n\ntype T struct{}\n\nfunc (T) M() {}\n\nfunc B() { _ = V }\n",
		"c.go": "package p\n\nimport \"strings\"\n\nfunc C() { var t T; t.M(); _ = strings.ToUpper(\"\") }\n",
		"d.go": "package p\n\nfunc D() { C(); var t T; t.M() }\n",
		"e.go": "package p\n\nfunc E() { D() }\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	uses, err := crossFileUses(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := bothWays(uses)
	want := []filePair{{a: "a.go", b: "b.go"}}
	if !slices.Equal(got, want) {
		t.Errorf("bothWays() = %v, want %v (uses %v)", got, want, uses)
	}
}

// filePair is two files of a package, a < b.
type filePair struct{ a, b string }

// bothWays lists the pairs of files each of which uses the other (uses: crossFileUses).
func bothWays(uses map[string]map[string][]string) []filePair {
	var out []filePair
	for a, targets := range uses {
		for b := range targets {
			if a < b && len(uses[b][a]) > 0 {
				out = append(out, filePair{a: a, b: b})
			}
		}
	}
	slices.SortFunc(out, func(x, y filePair) int { return strings.Compare(x.a+" "+x.b, y.a+" "+y.b) })
	return out
}

// crossFileUses type-checks the package in dir (its non-test files) and returns, by file and
// then by the file declaring them, the top-level functions, variables and concrete methods
// each file uses from another file. Imported packages are stubbed empty: what the package
// uses of them does not resolve (and is not wanted), while every use of its own names does.
func crossFileUses(dir string) (map[string]map[string][]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, entry := range entries {
		name := entry.Name()
		if entry.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: stubImporter{}, Error: func(error) {}} // stubbed imports do not resolve
	pkg, _ := conf.Check(files[0].Name.Name, fset, files, info)           // errors: those of the stubs only
	out := map[string]map[string][]string{}
	for id, obj := range info.Uses {
		if !declaredAtTop(pkg, obj) {
			continue
		}
		from, to := filepath.Base(fset.Position(id.Pos()).Filename), filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to {
			continue
		}
		if out[from] == nil {
			out[from] = map[string][]string{}
		}
		if name := objectName(obj); !slices.Contains(out[from][to], name) {
			out[from][to] = append(out[from][to], name)
		}
	}
	for _, targets := range out {
		for _, names := range targets {
			slices.Sort(names)
		}
	}
	return out, nil
}

// declaredAtTop reports whether obj is a function or variable declared at pkg's top level, or
// a method of one of pkg's concrete types.
func declaredAtTop(pkg *types.Package, obj types.Object) bool {
	if obj == nil || obj.Pkg() != pkg {
		return false
	}
	switch o := obj.(type) {
	case *types.Var:
		return o.Parent() == pkg.Scope()
	case *types.Func:
		recv := o.Signature().Recv()
		return (recv == nil && o.Parent() == pkg.Scope()) || (recv != nil && !types.IsInterface(recv.Type()))
	}
	return false
}

// objectName is obj's name, a method's with its receiver's type.
func objectName(obj types.Object) string {
	if f, ok := obj.(*types.Func); ok && f.Signature().Recv() != nil {
		recv := f.Signature().Recv().Type()
		if p, ok := recv.(*types.Pointer); ok {
			recv = p.Elem()
		}
		if named, ok := recv.(*types.Named); ok {
			return named.Obj().Name() + "." + f.Name()
		}
	}
	return obj.Name()
}

// stubImporter imports every package as an empty one named after its path's last element.
type stubImporter struct{}

func (stubImporter) Import(importPath string) (*types.Package, error) {
	pkg := types.NewPackage(importPath, path.Base(importPath))
	pkg.MarkComplete()
	return pkg, nil
}
