package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

func byString[T ~string](x, y T) bool { return x < y }

// goSources returns the text of every .go file of the repository, by path, but this package's.
func goSources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "_artifacts" || p == filepath.Join(root, "test", "docs")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no Go file found under the repository root")
	}
	return out
}

var (
	// e2eLiteral is an E2E_ variable in a Go string: "E2E_X" or "E2E_X=" + value.
	e2eLiteral = regexp.MustCompile(`"(E2E_[A-Z][A-Z0-9_]*)[="]`)
	knobName   = regexp.MustCompile(`\{name: +"([A-Z][A-Z0-9_]*)"`)
	varName    = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)(=.*)?$`)
)

// Every variable the code reads (an E2E_ string in any Go file, and every knob of bin/e2e) has a
// row in docs/knobs.md, and every variable a row there names is read by the code, the Makefile
// or a workflow the code writes.
func TestKnobsAreDocumented(t *testing.T) {
	src := goSources(t)
	inCode := map[string]bool{}
	for p, text := range src {
		for _, m := range e2eLiteral.FindAllStringSubmatch(text, -1) {
			inCode[m[1]] = true
		}
		if strings.HasSuffix(filepath.ToSlash(p), "internal/e2ecmd/knobs.go") {
			for _, m := range knobName.FindAllStringSubmatch(text, -1) {
				inCode[m[1]] = true
			}
		}
	}
	if !inCode["E2E_SIM_FAULT"] || !inCode["KUBECONFIG"] {
		t.Fatalf("the scan of the code missed E2E_SIM_FAULT or KUBECONFIG: %v", inCode)
	}
	page := "docs/knobs.md"
	text := read(t, page)
	inDocs := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		for _, span := range codeSpans(cells(l)[0]) {
			if m := varName.FindStringSubmatch(span); m != nil {
				inDocs[m[1]] = true
			}
		}
	}
	if missing := diff(inCode, inDocs, byString); len(missing) > 0 {
		t.Errorf("the code reads %v, which no table row of %s names: add a row saying what each does", missing, page)
	}
	makefile := read(t, "Makefile")
	for _, name := range diff(inDocs, inCode, byString) {
		word := regexp.MustCompile(`\b` + name + `\b`)
		found := word.MatchString(makefile)
		for _, text := range src {
			found = found || word.MatchString(text)
		}
		if !found {
			t.Errorf("%s has a row for %s, which neither the Go code nor the Makefile reads: remove the row, or say where it is read", page, name)
		}
	}
}

// docs/sim.md's fault table has a row for every fault of the sim's catalogue and for no other.
func TestFaultsAreDocumented(t *testing.T) {
	inCode := map[string]bool{}
	for _, f := range faults.Catalogue() {
		inCode[string(f.Name)] = true
	}
	page := "docs/sim.md"
	inDocs := map[string]bool{}
	for _, row := range tableRows(t, page, read(t, page), "| fault | effect |") {
		for _, n := range codeSpans(row[0]) {
			inDocs[n] = true
		}
	}
	if missing := diff(inCode, inDocs, byString); len(missing) > 0 {
		t.Errorf("faults %v of internal/sim/faults have no row in %s's fault table", missing, page)
	}
	if unknown := diff(inDocs, inCode, byString); len(unknown) > 0 {
		t.Errorf("%s's fault table names %v, which internal/sim/faults does not have", page, unknown)
	}
}

// docs/lanes.md's table of shipped lanes has a row for every lanes/*.yaml and no other, and the
// page names every old lane name that still runs.
func TestLanesAreDocumented(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "lanes", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	inCode := map[string]bool{}
	for _, f := range files {
		inCode[strings.TrimSuffix(filepath.Base(f), ".yaml")] = true
	}
	if len(inCode) == 0 {
		t.Fatal("no lane under lanes/")
	}
	page := "docs/lanes.md"
	text := read(t, page)
	inDocs := map[string]bool{}
	for _, row := range tableRows(t, page, text, "| lane | substrate |") {
		for _, n := range codeSpans(row[0]) {
			inDocs[n] = true
		}
	}
	if missing := diff(inCode, inDocs, byString); len(missing) > 0 {
		t.Errorf("lanes %v (lanes/*.yaml) have no row in %s's table of shipped lanes", missing, page)
	}
	if unknown := diff(inDocs, inCode, byString); len(unknown) > 0 {
		t.Errorf("%s's table of shipped lanes names %v, which have no file under lanes/", page, unknown)
	}
	for old, a := range lane.Aliases {
		if !strings.Contains(text, "`"+old+"`") {
			t.Errorf("%s does not name the old lane name %s, which still runs lane %s", page, old, a.Lane)
		}
	}
}

// intConsts returns the integer constants of a Go file whose names match re.
func intConsts(t *testing.T, rel string, re *regexp.Regexp) map[int]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, filepath.FromSlash(rel)), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			for i, n := range v.Names {
				if !re.MatchString(n.Name) || i >= len(v.Values) {
					continue
				}
				if lit, ok := v.Values[i].(*ast.BasicLit); ok && lit.Kind == token.INT {
					x, _ := strconv.Atoi(lit.Value)
					out[x] = true
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s declares no constant matching %s", rel, re)
	}
	return out
}

// docs/artifacts.md's table of exit codes is the codes bin/e2e and the verdict declare.
func TestExitCodesAreDocumented(t *testing.T) {
	exit := regexp.MustCompile(`^[eE]xit[A-Z]`)
	byInt := func(x, y int) bool { return x < y }
	for _, rel := range []string{"internal/e2ecmd/main.go", "framework/verdict/verdict.go"} {
		inCode := intConsts(t, rel, exit)
		page := "docs/artifacts.md"
		inDocs := map[int]bool{}
		for _, row := range tableRows(t, page, read(t, page), "| code | meaning |") {
			n, err := strconv.Atoi(row[0])
			if err != nil {
				t.Errorf("%s: exit code %q is not a number", page, row[0])
				continue
			}
			inDocs[n] = true
		}
		if missing := diff(inCode, inDocs, byInt); len(missing) > 0 {
			t.Errorf("exit codes %v of %s have no row in %s", missing, rel, page)
		}
		if unknown := diff(inDocs, inCode, byInt); len(unknown) > 0 {
			t.Errorf("%s lists exit codes %v, which %s does not declare", page, unknown, rel)
		}
	}
}

// docs/artifacts.md's failure classes are the verdict's classes.
func TestFailureClassesAreDocumented(t *testing.T) {
	rel := "framework/verdict/class.go"
	src := read(t, rel)
	inCode := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bClass = "([a-z-]+)"`).FindAllStringSubmatch(src, -1) {
		inCode[m[1]] = true
	}
	if len(inCode) == 0 {
		t.Fatalf("%s declares no Class constant", rel)
	}
	page := "docs/artifacts.md"
	text := read(t, page)
	start := strings.Index(text, "## Failure classes")
	if start < 0 {
		t.Fatalf("%s has no section Failure classes", page)
	}
	section := text[start:]
	if end := strings.Index(section, "A wait\nthat runs out"); end > 0 {
		section = section[:end]
	} else if end := strings.Index(section, "A wait that runs out"); end > 0 {
		section = section[:end]
	}
	inDocs := map[string]bool{}
	for _, n := range codeSpans(section) {
		inDocs[n] = true
	}
	if missing := diff(inCode, inDocs, byString); len(missing) > 0 {
		t.Errorf("failure classes %v (%s) are not listed in %s", missing, rel, page)
	}
	if unknown := diff(inDocs, inCode, byString); len(unknown) > 0 {
		t.Errorf("%s lists failure classes %v, which %s does not declare", page, unknown, rel)
	}
}
