package tenant_test

import (
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/testkit"
	"github.com/cozystack/cozy-e2e/internal/testkit/tenantenv"
)

// Flux writes a release's Ready condition before the rest of its status (history,
// observedGeneration): WaitRendered answers only once both are there, so the history read
// after it holds the release.
func testWaitRenderedWaitsForTheRestOfFluxsStatus(t *testing.T, env *tenantenv.Env) {
	ctx := testkit.Context(t, 30*time.Second)
	run, _ := tenant.NewRun("r2")
	names := run.Cluster("pools")
	env.Namespace(t, names.Namespace)
	p := tenant.Platform{Mgmt: env.Cluster}
	if err := p.CreateCluster(ctx, tenant.ClusterSpec{Names: names, Version: "v1.35",
		Pools: []lane.Pool{{Name: "md0", Class: "talos", Replicas: 1}}}); err != nil {
		t.Fatal(err)
	}
	env.SetStatus(t, tenant.HelmReleaseGVK, names.Namespace, names.HelmRelease(), map[string]any{
		"lastAttemptedGeneration": int64(1), "conditions": []any{tenantenv.Ready("True", "InstallSucceeded", "ok")}})
	done := make(chan error, 1)
	var r tenant.Rendering
	go func() {
		var err error
		r, err = p.WaitRendered(ctx, names, 1)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("answered on the Ready condition alone: %+v %v", r, err)
	case <-time.After(300 * time.Millisecond):
	}
	env.SetHelmReleaseStatus(t, names, 1, "True", "InstallSucceeded", "ok")
	if err := <-done; err != nil || !r.Ready {
		t.Fatalf("%+v %v", r, err)
	}
}
