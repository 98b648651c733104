package hostnames

import (
	"context"
	"testing"

	"github.com/cozystack/cozy-e2e/suite"
	"github.com/cozystack/cozy-e2e/suite/e2eframework"
)

// TestHostnames is the suite: the harness's join spec on every pool, then the feature on every
// pool in phase hostnames.
func TestHostnames(t *testing.T) {
	suite.Run(t, suite.Config{Name: "hostnames", Specs: func(w *suite.World) {
		w.JoinSpecs(context.Background())
		e2eframework.Specs(w, Phase, Feature())
	}})
}
