package lane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The committed workflow is exactly what the lanes generate, and each matrix entry's
// timeout-minutes is its lane's job cap: the workflow and the budgets cannot drift apart.
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
	var wf struct {
		Jobs map[string]struct {
			Strategy struct {
				Matrix struct {
					Include []struct {
						Lane    string `json:"lane"`
						Timeout int    `json:"timeout"`
					} `json:"include"`
				} `json:"matrix"`
			} `json:"strategy"`
			TimeoutMinutes string `json:"timeout-minutes"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(have, &wf); err != nil {
		t.Fatalf("workflow is not valid YAML: %v", err)
	}
	job := wf.Jobs["e2e"]
	if job.TimeoutMinutes != "${{ matrix.timeout }}" {
		t.Fatalf("timeout-minutes = %q, want the matrix entry's", job.TimeoutMinutes)
	}
	caps := map[string]int{}
	for _, l := range lanes {
		if l.Substrate == SubstrateKind {
			caps[l.Name] = l.Budget.JobCap.Minutes()
		}
	}
	if len(job.Strategy.Matrix.Include) != len(caps) {
		t.Fatalf("matrix has %d entries, %d kind lanes", len(job.Strategy.Matrix.Include), len(caps))
	}
	for _, e := range job.Strategy.Matrix.Include {
		if caps[e.Lane] == 0 || e.Timeout != caps[e.Lane] {
			t.Errorf("lane %s: timeout %d, job cap %d", e.Lane, e.Timeout, caps[e.Lane])
		}
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
