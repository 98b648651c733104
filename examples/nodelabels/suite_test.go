package nodelabels

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/cozy-e2e/suite"
)

// TestNodeLabels is the suite: suite.Run brings the tenant and its pools up, runs the specs,
// collects evidence, keeps or tears down, and writes the reports. Its phases are suite.yaml's.
func TestNodeLabels(t *testing.T) {
	suite.Run(t, suite.Config{Name: "nodelabels", Specs: func(w *suite.World) {
		w.JoinSpecs(context.Background())
		for _, p := range w.Tenant.Pools {
			Describe("pool "+p.Name(), func() {
				Spec(context.Background(), func() Input { return Input{Lifecycle: w.InPhase(), Pool: p} })
			})
		}
	}})
}
