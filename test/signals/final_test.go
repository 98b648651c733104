package signals

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// finalKinds open a "final because" cell: the three reasons a detector may end a wait.
var finalKinds = []string{"upstream's word: ", "outlived upstream's retry: ", "no retry changes it: "}

// TestEveryTerminalClassIsFinalBecause: every class a detector of framework/join ends a wait with
// (a terminal{Class: ...} literal) has a row in docs/signals.md's "Final states" table saying why
// the state is final, with the upstream lines; every row names a detector the package declares.
func TestEveryTerminalClassIsFinalBecause(t *testing.T) {
	root := projectRoot(t)
	classes, funcs := terminalClasses(t, root)
	if len(classes) < 8 {
		t.Fatalf("only %d terminal classes found in framework/join (%v); the parse is broken", len(classes), classes)
	}
	rows := finalRows(t, filepath.Join(root, "docs", "signals.md"))
	covered := map[string]bool{}
	detector := regexp.MustCompile(`\bjoin\.([A-Za-z_]\w*)`)
	for _, r := range rows {
		names := detector.FindAllStringSubmatch(r.detector, -1)
		if len(names) == 0 {
			t.Errorf("docs/signals.md:%d: the detector %q names no join.<function>", r.line, r.detector)
		}
		for _, n := range names {
			if !funcs[n[1]] {
				t.Errorf("docs/signals.md:%d: framework/join declares no function %s", r.line, n[1])
			}
		}
		if strings.TrimSpace(r.upstream) == "" {
			t.Errorf("docs/signals.md:%d: the upstream cell is empty", r.line)
		}
		for _, c := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(r.class, -1) {
			ok := false
			for _, k := range finalKinds {
				ok = ok || strings.HasPrefix(r.final, k)
			}
			if !ok {
				t.Errorf("docs/signals.md:%d: class %s: %q opens with none of %q", r.line, c[1], r.final, finalKinds)
				continue
			}
			covered[c[1]] = true
		}
	}
	for _, c := range classes {
		if !covered[c] {
			t.Errorf("framework/join ends a wait with class %s, but docs/signals.md's Final states table says nowhere why that state is final", c)
		}
	}
}

type finalRow struct {
	line                             int
	class, detector, final, upstream string
}

// finalRows reads the table whose header is class | detector | final because | upstream.
func finalRows(t *testing.T, path string) []finalRow {
	t.Helper()
	var out []finalRow
	for _, r := range tableRows(t, path, "class", "detector", "final because", "upstream") {
		c := r.cells
		out = append(out, finalRow{line: r.line, class: c[0], detector: c[1], final: c[2], upstream: c[3]})
	}
	if len(out) == 0 {
		t.Fatalf("%s has no table with the header class | detector | final because | upstream", path)
	}
	return out
}

// terminalClasses are the verdict classes framework/join's terminal{...} literals carry (a
// verdict constant, or a local variable assigned only verdict constants), by value, and the
// package's function names.
func terminalClasses(t *testing.T, root string) ([]string, map[string]bool) {
	t.Helper()
	values := verdictClasses(t, root)
	files, err := filepath.Glob(filepath.Join(root, "framework", "join", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("framework/join: no Go files (%v)", err)
	}
	found := map[string]bool{}
	funcs := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			funcs[fd.Name.Name] = true
			local := map[string][]string{} // variable -> the verdict constants assigned to it
			ast.Inspect(fd, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok || len(as.Lhs) != len(as.Rhs) {
					return true
				}
				for i, l := range as.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						if c := verdictConst(as.Rhs[i]); c != "" {
							local[id.Name] = append(local[id.Name], c)
						}
					}
				}
				return true
			})
			ast.Inspect(fd, func(n ast.Node) bool {
				cl, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if id, ok := cl.Type.(*ast.Ident); !ok || id.Name != "terminal" {
					return true
				}
				for _, e := range cl.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Class" {
						continue
					}
					consts := []string{verdictConst(kv.Value)}
					if id, ok := kv.Value.(*ast.Ident); ok {
						consts = local[id.Name]
					}
					if len(consts) == 0 || consts[0] == "" {
						t.Errorf("%s: function %s builds a terminal whose class the test cannot read", filepath.Base(f), fd.Name.Name)
					}
					for _, c := range consts {
						if v, ok := values[c]; ok {
							found[v] = true
						} else if c != "" {
							t.Errorf("%s: verdict.%s is no class of framework/verdict", filepath.Base(f), c)
						}
					}
				}
				return true
			})
		}
	}
	out := make([]string, 0, len(found))
	for c := range found {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, funcs
}

// verdictConst is the name X of an expression verdict.X, "" otherwise.
func verdictConst(e ast.Expr) string {
	se, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if x, ok := se.X.(*ast.Ident); ok && x.Name == "verdict" {
		return se.Sel.Name
	}
	return ""
}

// verdictClasses are framework/verdict's Class constants: name to value.
func verdictClasses(t *testing.T, root string) map[string]string {
	t.Helper()
	af, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "framework", "verdict", "class.go"), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range af.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out[n.Name] = v
					}
				}
			}
		}
	}
	return out
}

// beforeTheNode are the Final states rows (by their detector cell) whose detector judges one
// Machine before its Node is linked: the chart's MachineHealthCheck would replace that Machine
// after its nodeStartupTimeout, so each ends the wait sooner than upstream gives up.
var beforeTheNode = []string{
	"join.detectMachine (a client CSR",
	"join.identityFailure (a Node named otherwise",
	"join.identityFailure (a Node with another providerID",
	"join.diskFailure (a registry refusal",
	"join.unplaceable",
	"join.crashLoop",
	"join.endedVMI (a `Failed` VMI",
	"join.endedVMI (a `Succeeded` VMI",
}

// TestFinalsBeforeTheNodeSayTheyAreTheHarnesssLimit: a per-Machine final before the Node stops
// sooner than Cluster API's MachineHealthCheck would replace the Machine; its row says it is the
// harness's own limit, and why, and the page says what the health check does.
func TestFinalsBeforeTheNodeSayTheyAreTheHarnesssLimit(t *testing.T) {
	root := projectRoot(t)
	rows := finalRows(t, filepath.Join(root, "docs", "signals.md"))
	for _, d := range beforeTheNode {
		found := false
		for _, r := range rows {
			if !strings.HasPrefix(strings.TrimSpace(r.detector), d) {
				continue
			}
			found = true
			_, why, ok := strings.Cut(r.final, "The harness's own limit (MHC, below): ")
			if !ok || len(strings.TrimSpace(why)) < 20 {
				t.Errorf("docs/signals.md:%d: %s ends the wait before the MachineHealthCheck would replace the Machine; its \"final because\" does not say \"The harness's own limit (MHC, below): <why>\"", r.line, d)
			}
		}
		if !found {
			t.Errorf("docs/signals.md's Final states table has no row of %s", d)
		}
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "signals.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**MHC: where the harness stops sooner than upstream gives up.**", "nodeStartupTimeout", "machinehealthcheck_targets.go:217-257"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("docs/signals.md does not say %q", want)
		}
	}
}
