package exports

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestPublicSignaturesNameNoInternalType holds the public API sealed: no exported function,
// method, field, interface method or type of a package outside internal/ names a type of an
// internal/ package, which a module outside this one could neither name nor implement. A public
// package may use internal/ packages in its bodies; its signatures are what other modules see.
func TestPublicSignaturesNameNoInternalType(t *testing.T) {
	var leaks []string
	eachProductionFile(t, []string{"internal", "cmd", "test", "examples", "hack"}, func(rel string, fset *token.FileSet, f *ast.File) {
		if f.Name.Name == "main" {
			return
		}
		for _, l := range leaksOf(fset, f) {
			leaks = append(leaks, rel+":"+l)
		}
	})
	sort.Strings(leaks)
	for _, l := range leaks {
		t.Errorf("%s: a public signature names an internal/ type; no module outside this one can name or implement it: make the type public, or keep the signature unexported", l)
	}
}

// TestTheSealCheckFindsEachKindOfLeak feeds leaksOf one leak of every kind it must find, and
// the uses it must let pass (bodies, unexported names, public types).
func TestTheSealCheckFindsEachKindOfLeak(t *testing.T) {
	src := `package p

import (
	"context"

	"example.com/m/internal/hub"
	in "example.com/m/internal/report"
	"example.com/m/framework/cluster"
)

func Result() in.Kept { return in.Kept{} }
func Take(h *hub.Hub) {}
type Diagnostics interface{ Consoles() *hub.Hub }
type Options struct { Hub *hub.Hub; private *hub.Hub; Cluster *cluster.Cluster }
type T struct{}
func (T) Emit(e []map[string]hub.Event) {}
func (T) quiet(e hub.Event) {}
type t2 struct{}
func (t2) Loud(e hub.Event) {}
type Alias = hub.Event
var Var hub.Event
func Fine(ctx context.Context, c *cluster.Cluster) { _ = hub.New() }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := leaksOf(fset, f)
	want := []string{
		"11 Result names in.Kept",
		"12 Take names hub.Hub",
		"13 Diagnostics.Consoles names hub.Hub",
		"14 Options.Hub names hub.Hub",
		"16 T.Emit names hub.Event",
		"20 Alias names hub.Event",
		"21 Var names hub.Event",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("leaks found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// leaksOf is every exported signature of f that names a type of an internal/ package, as
// "<line> <name> names <pkg>.<Type>".
func leaksOf(fset *token.FileSet, f *ast.File) []string {
	internal := map[string]bool{} // the file's names of internal/ packages
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		if !strings.Contains("/"+path+"/", "/internal/") {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		internal[name] = true
	}
	var out []string
	check := func(what string, n ast.Node) {
		if n == nil {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := s.X.(*ast.Ident); ok && internal[x.Name] {
					out = append(out, strconv.Itoa(fset.Position(s.Pos()).Line)+" "+what+" names "+x.Name+"."+s.Sel.Name)
				}
				return false
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch x := d.(type) {
		case *ast.FuncDecl:
			if !x.Name.IsExported() {
				continue
			}
			name := x.Name.Name
			if x.Recv != nil {
				recv := receiverName(x.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue
				}
				name = recv + "." + name
			}
			check(name, x.Type)
		case *ast.GenDecl:
			for _, s := range x.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						checkType(s.Name.Name, s.Type, check)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							check(n.Name, s.Type)
						}
					}
				}
			}
		}
	}
	return out
}

// checkType checks an exported type's exported parts: a struct's exported and embedded fields,
// an interface's exported and embedded methods, or the whole of any other type.
func checkType(name string, typ ast.Expr, check func(string, ast.Node)) {
	var fields *ast.FieldList
	switch t := typ.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		check(name, typ)
		return
	}
	for _, fl := range fields.List {
		if len(fl.Names) == 0 {
			check(name, fl.Type)
			continue
		}
		for _, n := range fl.Names {
			if n.IsExported() {
				check(name+"."+n.Name, fl.Type)
			}
		}
	}
}

// receiverName is the type name of a method's receiver: T, *T, T[P] or *T[P].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// eachProductionFile parses every Go file of the module but its tests, the folders named skip,
// testdata and the modules of their own below it (hack/tools/...), and hands each to do with its
// path from the module's root.
func eachProductionFile(t *testing.T, skip []string, do func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "bin" || n == "_artifacts" || n == "testdata" || slices.Contains(skip, n) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		do(filepath.ToSlash(rel), fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
