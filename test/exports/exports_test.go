// Package exports holds the module to a small public surface: every exported function, method
// and type has a caller outside its tests, or an entry of allow.txt that says who uses it.
package exports

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// implicit are method names called through an interface of the standard library or of a
// dependency (fmt, errors, encoding/json, io, sort, controller-runtime), never by name.
var implicit = map[string]bool{"Error": true, "String": true, "Unwrap": true, "Is": true, "As": true,
	"MarshalJSON": true, "UnmarshalJSON": true, "MarshalYAML": true, "UnmarshalYAML": true, "Format": true,
	"Write": true, "Read": true, "Close": true, "Len": true, "Less": true, "Swap": true, "ServeHTTP": true,
	"Reconcile": true, "DeepCopyObject": true, "GetObjectKind": true, "Start": true, "NeedLeaderElection": true}

type decl struct {
	name, where string
}

// TestEveryExportHasACaller parses every Go file of the module and of examples/ and names each
// exported function, method or type that no file refers to but the tests of its own package
// (a suite's _test.go files and a test package's helpers are callers of other packages).
func TestEveryExportHasACaller(t *testing.T) {
	root := filepath.Join("..", "..")
	allowed := allowList(t)
	fset := token.NewFileSet()
	var decls []decl
	uses := map[string]int{}                 // by name, outside any test file
	testUses := map[string]map[string]bool{} // by name: the folders of the test files that use it
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "hack" || n == "bin" || n == "_artifacts" || n == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		isTest := strings.HasSuffix(p, "_test.go")
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		declared := map[*ast.Ident]bool{}
		for _, dd := range f.Decls {
			if isTest {
				break
			}
			switch x := dd.(type) {
			case *ast.FuncDecl:
				if x.Name.IsExported() && x.Name.Name != "main" {
					declared[x.Name] = true
					decls = append(decls, decl{x.Name.Name, rel})
				}
			case *ast.GenDecl:
				for _, s := range x.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.IsExported() {
						declared[ts.Name] = true
						decls = append(decls, decl{ts.Name.Name, rel})
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			switch {
			case !ok || declared[id]:
			case isTest:
				if testUses[id.Name] == nil {
					testUses[id.Name] = map[string]bool{}
				}
				testUses[id.Name][filepath.Dir(rel)] = true
			default:
				uses[id.Name]++
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var unused []string
	for _, d := range decls {
		if uses[d.name] > 0 || implicit[d.name] || allowed[d.where+" "+d.name] {
			continue
		}
		other := false
		for dir := range testUses[d.name] {
			other = other || dir != filepath.Dir(d.where)
		}
		if other {
			continue
		}
		unused = append(unused, d.where+" "+d.name)
	}
	sort.Strings(unused)
	for _, u := range unused {
		t.Errorf("%s: exported, and nothing outside its tests refers to it; remove it, unexport it, or add it to test/exports/allow.txt with who uses it", u)
	}
}

// allowList reads allow.txt: "<file> <name>  # who uses it", one a line.
func allowList(t *testing.T) map[string]bool {
	f, err := os.Open("allow.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		entry, why, ok := strings.Cut(line, "#")
		if !ok || strings.TrimSpace(why) == "" || len(strings.Fields(entry)) != 2 {
			t.Errorf("allow.txt:%d: want \"<file> <name>  # who uses it\", got %q", n, line)
			continue
		}
		out[strings.Join(strings.Fields(entry), " ")] = true
	}
	return out
}
