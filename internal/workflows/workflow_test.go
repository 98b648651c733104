package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// The committed workflow is exactly what the lanes generate: the workflow and the budgets
// cannot drift apart (workflow_lanes_test.go checks what it says of each lane).
func TestCommittedWorkflowMatchesTheLanes(t *testing.T) {
	lanes, err := lane.LoadDir(filepath.Join("..", "..", "lanes"))
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
		t.Fatalf("%s drifted from lanes/*.yaml; run `make workflows`:\n%s", WorkflowPath, lane.Diff(string(have), string(want)))
	}
	var wf map[string]any
	if err := yaml.Unmarshal(have, &wf); err != nil {
		t.Fatalf("workflow is not valid YAML: %v", err)
	}
}

// The workflow runs the lane through bin/e2e, whose exit code is the run's (README's exit code
// table); `make e2e` would turn every failure into make's own 2.
func TestWorkflowRunsTheHarnessThatCarriesTheExitCode(t *testing.T) {
	lanes, err := lane.LoadDir(filepath.Join("..", "..", "lanes"))
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
	lanes, err := lane.LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lanes {
		l.Runner.Nightly = l.Substrate == lane.SubstrateKind
	}
	if _, err := Workflow(lanes); err == nil || !strings.Contains(err.Error(), "every kind lane is runner.nightly") {
		t.Fatalf("every kind lane nightly: %v", err)
	}
}

// Pull requests and pushes run one kind job per management setup: two every-change kind lanes
// that install the same platform on the same management Kubernetes are refused (their tenant
// versions belong in one lane's clusters), and the shipped matrix holds one lane per setup.
func TestWorkflowRunsOneKindJobPerManagementSetup(t *testing.T) {
	lanes, err := lane.LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	setups := map[string]string{}
	for _, l := range lanes {
		if l.Substrate != lane.SubstrateKind || l.Runner.Nightly {
			continue
		}
		if other, dup := setups[managementSetup(l)]; dup {
			t.Errorf("lanes %s and %s share the management setup %s", other, l.Name, managementSetup(l))
		}
		setups[managementSetup(l)] = l.Name
	}
	if len(setups) == 0 {
		t.Fatal("no every-change kind lane")
	}
	var twin *lane.Lane
	for _, l := range lanes {
		if l.Name == "kubernetes" {
			c := *l
			c.Name = "kubernetes-twin"
			twin = &c
		}
	}
	if twin == nil {
		t.Fatal("no lane kubernetes")
	}
	_, err = Workflow(append(lanes, twin))
	if err == nil || !strings.Contains(err.Error(), "kind lanes kubernetes, kubernetes-twin install the same management setup (platform release:unknown (isp-full-generic) on management Kubernetes v1.35.0)") {
		t.Fatalf("two lanes of one setup: %v", err)
	}
	// A nightly lane stands apart from the lanes of every change, and the schedule runs it in
	// their place; two nightly lanes of one setup are refused as well.
	twin.Runner.Nightly = true
	_, err = Workflow(append(lanes, twin))
	if err == nil || !strings.Contains(err.Error(), "nightly kind lanes kubernetes-lifecycle, kubernetes-twin install the same management setup") {
		t.Fatalf("two nightly lanes of one setup: %v", err)
	}
	var kind []*lane.Lane
	for _, l := range lanes {
		if l.Substrate == lane.SubstrateKind {
			kind = append(kind, l)
		}
	}
	if got := Scheduled(kind); strings.Join(got, ",") != "kubernetes-lifecycle" {
		t.Errorf("the schedule runs %v; want the nightly lane of the one setup, kubernetes-lifecycle", got)
	}
}

// The reusable workflow takes the old lane names, for one release, and gives them the runner and
// job cap of the lane they merged into (framework/lane's TestOldLaneNamesLoadTheMergedLane holds
// what the old names load).
func TestOldLaneNamesRunTheMergedLane(t *testing.T) {
	lanes, err := lane.LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	re, err := ReusableWorkflow(lanes)
	if err != nil {
		t.Fatal(err)
	}
	for old := range lane.Aliases {
		if !strings.Contains(string(re), `"`+old+`":215`) || !strings.Contains(string(re), `"`+old+`":["oracle-vm-32cpu-128gb-x86-64"]`) {
			t.Errorf("the reusable workflow does not take %s", old)
		}
	}
}
