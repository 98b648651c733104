package cdi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The real cdi-controller owns DataVolumes, their claims and importer Pods; this package plays
// only the importer's container and the provisioner. It fails if the package registers a
// controller for DataVolumes again (For, Owns or Watches of a DataVolume) or takes CDI's API
// types, through which a stand-in would write DataVolume status.
func TestNoDataVolumeController(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files++
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "kubevirt.io/containerized-data-importer-api/") {
				t.Errorf("%s imports %s: the stand-in reads DataVolumes' metadata only and writes none", fset.Position(imp.Pos()), p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "For" && sel.Sel.Name != "Owns" && sel.Sel.Name != "Watches") {
				return true
			}
			for _, arg := range call.Args {
				ast.Inspect(arg, func(m ast.Node) bool {
					if id, ok := m.(*ast.Ident); ok && strings.Contains(id.Name, "DataVolume") || isDataVolumeKind(m) {
						t.Errorf("%s: %s registers a controller on DataVolumes; cdi-controller owns them", fset.Position(call.Pos()), sel.Sel.Name)
						return false
					}
					return true
				})
			}
			return true
		})
	}
	if files == 0 {
		t.Fatal("no Go file of the package read")
	}
}

func isDataVolumeKind(n ast.Node) bool {
	lit, ok := n.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && strings.Contains(lit.Value, "DataVolume")
}
