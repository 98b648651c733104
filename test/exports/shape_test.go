package exports

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a production function of the module may be, from its func line
// to its closing brace: a longer one is split along the steps its comments name.
const maxFuncLines = 80

// TestNoProductionFunctionIsLong holds every function outside the tests to maxFuncLines. The
// tools modules under hack/tools are modules of their own, built from their pins, and not read.
func TestNoProductionFunctionIsLong(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	funcs := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "bin" || n == "_artifacts" || n == "testdata" {
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
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			funcs++
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s: func %s is %d lines; split it along its steps, each under %d", rel, fd.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if funcs < 1000 {
		t.Errorf("read %d functions; the module has more than 1000", funcs)
	}
}
