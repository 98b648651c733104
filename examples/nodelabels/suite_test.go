package nodelabels

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// TestNodeLabels is the suite: suiterun.Run brings the tenant and its pools up, runs the specs,
// collects evidence, keeps or tears down, and writes the reports. Its phases are suite.yaml's.
func TestNodeLabels(t *testing.T) {
	suiterun.Run(t, suiterun.Config{Name: "nodelabels", Specs: func(w *suiterun.World) {
		w.JoinSpecs(context.Background())
		for _, p := range w.Tenant.Pools {
			Describe("pool "+p.Name(), func() {
				Spec(context.Background(), func() Input { return Input{Lifecycle: w.InPhase(), Pool: p} })
			})
		}
	}})
}
