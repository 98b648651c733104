// Package signals holds docs/signals.md to the code: every string constant the join, console,
// tenant and osfamily packages declare is a signal with a row there (the harness column names it
// as `pkg.Name`, the signal column shows its value), unless notSignals below says why it is none.
package signals

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// module is the harness's module path; a constant defined as another package's constant is
// resolved when that package is one of signalPackages.
const module = "github.com/cozystack/cozy-e2e/"

// signalPackages are the packages whose string constants are signals, by package name.
var signalPackages = map[string]string{
	"join":     "framework/join",
	"console":  "framework/serialconsole",
	"tenant":   "framework/tenant",
	"osfamily": "framework/osfamily",
}

// notSignals are string constants of those packages that are no signal, with why. A name here
// that the code no longer declares fails the test, so the list cannot rot.
var notSignals = map[string]string{
	// The harness's own vocabulary: stage names (docs/architecture.md), not anything upstream says.
	"join.StageBootstrapTemplate": "a stage name",
	"join.StageBootstrapData":     "a stage name",
	"join.StageDiskImport":        "a stage name",
	"join.StageVMIRunning":        "a stage name",
	"join.StageGuestBoot":         "a stage name",
	"join.StageJoin":              "a stage name",
	"join.StageNodeRegistered":    "a stage name",
	"join.StageProviderID":        "a stage name",
	"join.StageNodeRef":           "a stage name",
	"join.StageReady":             "a stage name",
	"join.StageSchedulable":       "a stage name",
	"join.StageWorkloadPod":       "a stage name",
	// Marks the harness writes on what it creates itself, and reads back only from there.
	"join.LabelPool":           "the harness's label on its own workload pods",
	"tenant.LabelManagedBy":    "the harness's mark on the objects it creates",
	"tenant.ManagedBy":         "the value of that mark",
	"tenant.WorkloadNamespace": "the harness's own namespace in the tenant cluster",
	"tenant.WorkerCPU":         "the vCPUs the harness asks for its workers (nodeGroups.<pool>.resources.cpu)",
	// The harness's words in its records and messages.
	"console.SourceSubresource": "the name of a stream's source in the harness's records",
	"console.SourceLog":         "the name of a stream's source in the harness's records",
	"console.EndedTaken":        "the harness's words for why a stream ended",
	"console.EndedExited":       "the harness's words for why a stream ended",
}

// signalConst is one string constant: package name, identifier and value.
type signalConst struct{ pkg, name, value string }

func (c signalConst) ref() string { return c.pkg + "." + c.name }

// TestEverySignalConstantHasARow: a signal constant without a row (or whose row does not show
// its value) fails, so a new detector cannot read a signal nobody traced upstream.
func TestEverySignalConstantHasARow(t *testing.T) {
	root := projectRoot(t)
	rows := signalRows(t, filepath.Join(root, "docs", "signals.md"))
	consts := stringConsts(t, root)
	declared := map[string]bool{}
	for _, c := range consts {
		declared[c.ref()] = true
		if _, ok := notSignals[c.ref()]; ok {
			continue
		}
		named := false
		shown := false
		for _, r := range rows {
			if strings.Contains(r.harness, "`"+c.ref()+"`") {
				named = true
				shown = shown || strings.Contains(r.signal, c.value)
			}
		}
		switch {
		case !named:
			t.Errorf("docs/signals.md has no row whose harness column names `%s` (value %q): add one with the upstream file that produces it, or say in notSignals why it is no signal", c.ref(), c.value)
		case !shown:
			t.Errorf("docs/signals.md: no row naming `%s` shows its value %q in the signal column", c.ref(), c.value)
		}
	}
	var stale []string
	for ref := range notSignals {
		if !declared[ref] {
			stale = append(stale, ref)
		}
	}
	sort.Strings(stale)
	for _, ref := range stale {
		t.Errorf("notSignals names %s, which is no string constant of its package any more", ref)
	}
	if len(consts)-len(notSignals) < 20 {
		t.Errorf("only %d signal constants found; the parse of %v is broken", len(consts)-len(notSignals), signalPackages)
	}
}

// TestEveryRowIsComplete: every row names a harness place, an upstream source or says there is
// none, a sim file, and one of the page's statuses.
func TestEveryRowIsComplete(t *testing.T) {
	rows := signalRows(t, filepath.Join(projectRoot(t), "docs", "signals.md"))
	if len(rows) < 50 {
		t.Fatalf("docs/signals.md: %d rows under the signal | harness | upstream | sim | status header; the parse is broken", len(rows))
	}
	for _, r := range rows {
		if r.signal == "" || r.harness == "" || r.upstream == "" || r.sim == "" {
			t.Errorf("docs/signals.md:%d: a cell is empty", r.line)
		}
		if !strings.HasPrefix(r.status, "confirmed") && !strings.HasPrefix(r.status, "sim only: ") && !strings.HasPrefix(r.status, "disagrees (D") {
			t.Errorf("docs/signals.md:%d: status %q is none of confirmed, sim only: ..., disagrees (Dn)", r.line, r.status)
		}
	}
}

type row struct {
	line                                   int
	signal, harness, upstream, sim, status string
}

// signalRows reads the rows of every table of path whose header is signal | harness | upstream |
// sim | status. A `\|` inside a cell is a literal bar.
func signalRows(t *testing.T, path string) []row {
	t.Helper()
	var out []row
	for _, r := range tableRows(t, path, "signal", "harness", "upstream", "sim", "status") {
		c := r.cells
		out = append(out, row{line: r.line, signal: c[0], harness: c[1], upstream: c[2], sim: c[3], status: c[4]})
	}
	return out
}

// tableRow is one body row of a markdown table: its line in the file and its cells.
type tableRow struct {
	line  int
	cells []string
}

// tableRows reads the body rows of every table of path whose header is exactly header; a row
// with another number of cells is an error. A `\|` inside a cell is a literal bar.
func tableRows(t *testing.T, path string, header ...string) []tableRow {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []tableRow
	in := false
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "|") {
			in = false
			continue
		}
		cells := splitRow(line)
		if strings.Join(cells, "|") == strings.Join(header, "|") {
			in = true
			continue
		}
		if !in || strings.Trim(strings.Join(cells, ""), "- ") == "" {
			continue
		}
		if len(cells) != len(header) {
			t.Errorf("%s:%d: %d cells, want %d", path, i+1, len(cells), len(header))
			continue
		}
		out = append(out, tableRow{line: i + 1, cells: cells})
	}
	return out
}

func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// stringConsts parses the non-test files of signalPackages and returns their string constants.
// A constant defined as another constant (of its own package, or of another signal package) is
// resolved; one defined from a package outside them, or numeric, is not a string constant here.
func stringConsts(t *testing.T, root string) []signalConst {
	t.Helper()
	type decl struct {
		pkg, name string
		expr      ast.Expr
		imports   map[string]string // local name -> signal package name
	}
	var decls []decl
	for pkg, dir := range signalPackages {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			imports := map[string]string{}
			for _, im := range af.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				for name, d := range signalPackages {
					if p == module+d {
						local := name
						if im.Name != nil {
							local = im.Name.Name
						}
						imports[local] = name
					}
				}
			}
			for _, d := range af.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				var last []ast.Expr
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					values := vs.Values
					if len(values) == 0 {
						values = last // an implicit repetition of the previous spec's values
					}
					last = values
					for i, n := range vs.Names {
						if i < len(values) && n.Name != "_" {
							decls = append(decls, decl{pkg: pkg, name: n.Name, expr: values[i], imports: imports})
						}
					}
				}
			}
		}
	}
	byRef := map[string]decl{}
	for _, d := range decls {
		byRef[d.pkg+"."+d.name] = d
	}
	var eval func(d decl, e ast.Expr, depth int) (string, bool)
	eval = func(d decl, e ast.Expr, depth int) (string, bool) {
		if depth > 10 {
			return "", false
		}
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case *ast.ParenExpr:
			return eval(d, e.X, depth+1)
		case *ast.CallExpr: // a conversion, Stage("join")
			if len(e.Args) == 1 {
				return eval(d, e.Args[0], depth+1)
			}
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				a, ok1 := eval(d, e.X, depth+1)
				b, ok2 := eval(d, e.Y, depth+1)
				return a + b, ok1 && ok2
			}
		case *ast.Ident:
			if o, ok := byRef[d.pkg+"."+e.Name]; ok {
				return eval(o, o.expr, depth+1)
			}
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok {
				if pkg, ok := d.imports[x.Name]; ok {
					if o, ok := byRef[pkg+"."+e.Sel.Name]; ok {
						return eval(o, o.expr, depth+1)
					}
				}
			}
		}
		return "", false
	}
	var out []signalConst
	for _, d := range decls {
		if v, ok := eval(d, d.expr, 0); ok {
			out = append(out, signalConst{pkg: d.pkg, name: d.name, value: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ref() < out[j].ref() })
	return out
}

// projectRoot is the repository's root: go test runs a package's tests in its own folder,
// two levels below it.
func projectRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s, two levels above the test's folder: %v", dir, err)
	}
	return dir
}
