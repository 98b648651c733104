package lane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeLane writes a lane file (its folders made) and returns its path.
func writeLane(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// simLane is this checkout's sim lane, by its absolute path.
func simLane(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A suite's path is read from the folder of the lane file that names it, or as it is when
// absolute; a lane that inherits the suites list reads its paths from the file that wrote it.
func TestASuitePathIsReadFromTheFileThatNamesIt(t *testing.T) {
	tmp := t.TempDir()
	mine := filepath.Join(tmp, "mine")
	lane := func(name, path string) string {
		return "name: " + name + "\nextends: " + simLane(t) + "\nsuites:\n  - name: mine\n    path: " + path + "\n"
	}
	for _, c := range []struct{ name, path, want string }{
		{"up", "..", mine},
		{"here", ".", filepath.Join(mine, "lanes")},
		{"abs", filepath.Join(tmp, "elsewhere"), filepath.Join(tmp, "elsewhere")},
	} {
		l, err := Load(writeLane(t, filepath.Join(mine, "lanes", c.name+".yaml"), lane(c.name, c.path)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := l.Suites[0].Dir(); got != c.want {
			t.Errorf("path %s in %s: folder %s; want %s", c.path, l.File, got, c.want)
		}
		if !strings.Contains(string(l.Resolved), "path: "+c.want) {
			t.Errorf("path %s: the lane as one document names it %q; want the folder %s, so a copy elsewhere means the same", c.path, l.Resolved, c.want)
		}
	}
	// Inherited: the suites of up.yaml, read from its folder, not from the child's.
	child := writeLane(t, filepath.Join(tmp, "other", "deeper", "child.yaml"), "name: child\nextends: ../../mine/lanes/up.yaml\n")
	l, err := Load(child)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Suites[0].Dir(); got != mine {
		t.Errorf("inherited path ..: folder %s; want %s, read from the file that names it (%s)", got, mine, l.Suites[0].From())
	}
}

// extends by an absolute path is that file, not a path joined onto the lane's folder.
func TestExtendsByAnAbsolutePath(t *testing.T) {
	p := writeLane(t, filepath.Join(t.TempDir(), "lanes", "mine.yaml"), "name: mine\nextends: "+simLane(t)+"\n")
	l, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if l.Extends != simLane(t) || l.Substrate != SubstrateSim {
		t.Errorf("extends %s: loaded %q (substrate %q); want the sim lane", simLane(t), l.Extends, l.Substrate)
	}
}

// An error about a field the lane inherits names the lane's own file, never a line of the
// file it extends as if it were its own, and says where the inherited field was written.
func TestAnInheritedFieldIsNamedInTheFileThatWroteIt(t *testing.T) {
	p := writeLane(t, filepath.Join(t.TempDir(), "mine.yaml"),
		"name: mine\nextends: "+simLane(t)+"\nsuites:\n  - name: mine\n    path: .\n")
	l, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	errs := l.CheckSuites(SuiteCatalog{"mine": {{Name: "labels"}}})
	if len(errs) != 1 {
		t.Fatalf("want one error, the missing phase; got %v", errs)
	}
	e := errs[0]
	if e.File != p || e.Line != 0 || !strings.HasPrefix(e.From, simLane(t)+":") {
		t.Errorf("missing phase named at %s line %d (from %q); want %s, no line of its own (it writes no budget), from %s:<line>: %v", e.File, e.Line, e.From, p, simLane(t), e)
	}
	// Its own field keeps its own line.
	errs = l.CheckSuites(SuiteCatalog{"mine": {{Name: "tenant", Err: os.ErrNotExist, Field: "path"}}})
	if len(errs) != 1 || errs[0].Line != 5 || errs[0].Path != "suites[0].path" || errs[0].From != "" {
		t.Errorf("a suite's path error: %v; want %s:5: suites[0].path", errs, p)
	}
}
