package kubernetes

import (
	"context"
	"fmt"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// TestKubernetes runs the suite under the orchestrator, which sets the E2E_* environment.
// Run bare (go test ./...), it has no lane and no cluster and says how to run it.
func TestKubernetes(t *testing.T) {
	r := &refusals{created: fmt.Errorf("the refusal cluster was not created: the pools phase never started")}
	suiterun.Run(t, suiterun.Config{Name: Name, Phases: Phases, Specs: r.describe, WhileJoining: r.render})
}

// refusals is the refusal cluster, rendering beside the pools while they join so the refusals
// phase only judges; created says why it was not created.
type refusals struct {
	sel     Selection
	names   tenant.Names
	created error
}

// render creates the refusal cluster in the pools phase, when the lane's filter runs the refusals.
func (r *refusals) render(ctx context.Context, w *suiterun.World) {
	if r.sel.Refusals {
		r.created = w.Tenant.CreateCluster(ctx, suiterun.RefusalCluster(r.names, w.Lane.Kubernetes.Version))
	}
}
