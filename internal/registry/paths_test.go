package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// The check reads a suite's path as the run builds it: from the folder of the lane file that
// names it. path: . in a lanes/ folder is that folder, which holds no suite.yaml, and is
// refused at suites[0].path with the path that names the suite's folder; path: .. is accepted.
func TestTheCheckReadsASuitePathAsTheRunDoes(t *testing.T) {
	sim, err := filepath.Abs(filepath.Join("..", "..", "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	needs, err := os.ReadFile(filepath.Join("..", "..", "examples", "nodelabels", "suite.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(t.TempDir(), "mine")
	if err := os.MkdirAll(filepath.Join(mine, "lanes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mine, "suite.yaml"), needs, 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(path string) *lane.Lane {
		t.Helper()
		f := filepath.Join(mine, "lanes", "mine.yaml")
		body := "name: mine\nextends: " + sim + "\nsuites:\n  - name: nodelabels\n    path: " + path +
			"\nbudget:\n  jobCap: 14m\n  phases:\n    - name: labels\n      ceiling: 20s\n"
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := lane.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	err = Check(load("."))
	if err == nil {
		t.Fatalf("path: . (the lanes folder, no suite.yaml) accepted; the run would build %s", filepath.Join(mine, "lanes"))
	}
	for _, want := range []string{"mine.yaml:", "suites[0].path:", "path: ..", "no suite.yaml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("path: . refused with %q; want it to say %q", err, want)
		}
	}
	l := load("..")
	if err := Check(l); err != nil {
		t.Fatalf("path: .. (the suite's folder): %v", err)
	}
	if got := l.Suites[0].Dir(); got != mine {
		t.Errorf("path: ..: the run builds %s; want %s, the folder whose suite.yaml the check read", got, mine)
	}
}
