package lane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The committed workflow is exactly what the lanes generate: the workflow and the budgets
// cannot drift apart (workflow_lanes_test.go checks what it says of each lane).
func TestCommittedWorkflowMatchesTheLanes(t *testing.T) {
	lanes, err := LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Workflow(lanes)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join("..", "..", WorkflowPath))
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != string(want) {
		t.Fatalf("%s drifted from lanes/*.yaml; run `make workflows`:\n%s", WorkflowPath, Diff(string(have), string(want)))
	}
	var wf map[string]any
	if err := yaml.Unmarshal(have, &wf); err != nil {
		t.Fatalf("workflow is not valid YAML: %v", err)
	}
}

// The workflow runs the lane through bin/e2e, whose exit code is the run's (README's exit code
// table); `make e2e` would turn every failure into make's own 2.
func TestWorkflowRunsTheHarnessThatCarriesTheExitCode(t *testing.T) {
	lanes, err := LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := Workflow(lanes)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Jobs map[string]struct {
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(wf, &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range doc.Jobs["e2e"].Steps {
		if strings.Contains(s.Run, "make e2e") {
			t.Errorf("step %q runs make e2e, which exits 2 on every failure", s.Run)
		}
		found = found || strings.Contains(s.Run, "bin/e2e run --lane ${{ matrix.lane }}")
	}
	if !found {
		t.Error("no step runs bin/e2e run --lane ${{ matrix.lane }}")
	}
}

// A lane set whose kind lanes are all nightly would leave pull requests an empty matrix, which
// GitHub refuses: the workflow is not generated, and the error says why.
func TestWorkflowRefusesOnlyNightlyKindLanes(t *testing.T) {
	lanes, err := LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lanes {
		l.Runner.Nightly = l.Substrate == SubstrateKind
	}
	if _, err := Workflow(lanes); err == nil || !strings.Contains(err.Error(), "every kind lane is runner.nightly") {
		t.Fatalf("every kind lane nightly: %v", err)
	}
}
