package laneplan_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/catalog"
	"github.com/cozystack/cozy-e2e/internal/laneplan"
)

var update = flag.Bool("update", false, "rewrite the golden plans")

// `make e2e-plan` prints exactly the committed plan of each shipped lane: phases with ceilings,
// pins with every unknown digest and its note, the machine, the kind cluster, the platform, the
// install steps and gates, pools and classes, and the artifacts. A change to a lane or to the
// install order shows up here as a diff to review.
func TestPlanGolden(t *testing.T) {
	for _, name := range []string{"kubernetes", "kubernetes-lifecycle", "sim"} {
		t.Run(name, func(t *testing.T) {
			l, err := lane.Find(filepath.Join("..", "..", "lanes"), name)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			laneplan.Write(&b, l, catalog.PlanSections(l)...)
			path := filepath.Join("testdata", "plan-"+name+".golden")
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./internal/laneplan -run TestPlanGolden -update writes it)", err)
			}
			if b.String() != string(want) {
				t.Fatalf("the plan of %s changed (review, then -update):\n%s", name, lane.Diff(b.String(), string(want)))
			}
		})
	}
}
