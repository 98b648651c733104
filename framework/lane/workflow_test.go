package lane

import (
	"os"
	"path/filepath"
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
