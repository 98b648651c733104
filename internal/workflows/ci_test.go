package workflows

import (
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// Every sim lane is run by a step of the CI workflow, by name or by file; one that is not is
// named with the step to add.
func TestCIMustRunEverySimLane(t *testing.T) {
	lanes := []*lane.Lane{{Name: "sim", File: "lanes/sim.yaml", Substrate: lane.SubstrateSim},
		{Name: "sim-x", File: "examples/x/lanes/sim-x.yaml", Substrate: lane.SubstrateSim},
		{Name: "kind", File: "lanes/kind.yaml", Substrate: lane.SubstrateKind}}
	ci := "jobs:\n  test:\n    steps:\n      - run: make bin/e2e && bin/e2e run --lane sim\n"
	err := CheckCI([]byte(ci), lanes, ".")
	if err == nil || !strings.Contains(err.Error(), "examples/x/lanes/sim-x.yaml (a step: bin/e2e run --lane examples/x/lanes/sim-x.yaml)") || strings.Contains(err.Error(), "kind") {
		t.Fatalf("a sim lane CI does not run: %v", err)
	}
	ci += "      - run: bin/e2e run --lane examples/x/lanes/sim-x.yaml\n"
	if err := CheckCI([]byte(ci), lanes, "."); err != nil {
		t.Fatalf("every sim lane run: %v", err)
	}
}
