package exports

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// maxFuncLines is the longest a production function of the module may be, from its func line
// to its closing brace: a longer one is split along the steps its comments name.
const maxFuncLines = 80

// TestNoProductionFunctionIsLong holds every function outside the tests to maxFuncLines. The
// tools modules under hack/tools are modules of their own, built from their pins, and not read.
func TestNoProductionFunctionIsLong(t *testing.T) {
	funcs := 0
	eachProductionFile(t, nil, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			funcs++
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: func %s is %d lines; split it along its steps, each under %d", rel, fd.Name.Name, n, maxFuncLines)
			}
		}
	})
	if funcs < 1000 {
		t.Errorf("read %d functions; the module has more than 1000", funcs)
	}
}

// TestFrameworkReturnsErrors holds framework/ to what design.md says of it: the Go library
// returns errors, so no production file there imports Ginkgo or Gomega. The Ginkgo half (a
// suite's run and the specs it wires) is suites/suiterun.
func TestFrameworkReturnsErrors(t *testing.T) {
	files := 0
	eachProductionFile(t, nil, func(rel string, fset *token.FileSet, f *ast.File) {
		if !strings.HasPrefix(rel, "framework/") {
			return
		}
		files++
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); strings.HasPrefix(p, "github.com/onsi/") {
				t.Errorf("%s imports %s: framework/ returns errors; a spec or an assertion belongs in suites/suiterun", rel, p)
			}
		}
	})
	if files < 60 {
		t.Errorf("read %d production files under framework/; it has more than 60", files)
	}
}
