package hostnames

import (
	"context"
	"testing"

	"github.com/cozystack/cozy-e2e/suites/suiterun"
	"github.com/cozystack/cozy-e2e/suites/suiterun/e2eframework"
)

// TestHostnames is the suite: the harness's join spec on every pool, then the feature on every
// pool in phase hostnames.
func TestHostnames(t *testing.T) {
	suiterun.Run(t, suiterun.Config{Name: "hostnames", Specs: func(w *suiterun.World) {
		w.JoinSpecs(context.Background())
		e2eframework.Specs(w, Phase, Feature())
	}})
}
