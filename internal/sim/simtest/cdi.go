package simtest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// PodCIDR is the range the kwok of Machines gives pod IPs.
const PodCIDR = "10.244.0.1/16"

// CDI runs the real cdi-controller against the environment (call Machines first: CDI's claims
// bind through kube-controller-manager and kube-scheduler) and sets its storage up as the lanes
// do (internal/install's StorageClasses and StorageProfiles). Missing tools fail the test under
// CI and skip it elsewhere, as the control plane's do.
func (e *Env) CDI(t testing.TB) {
	t.Helper()
	b := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctl, err := realupstream.StartCDIController(ctx, b, e.Cluster, realupstream.Options{
		Dir: filepath.Join(e.Dir, "cdi-controller"), Kubeconfig: e.API.AdminKubeconfig, PodCIDR: PodCIDR})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Stop(5 * time.Second) })
	c, err := cluster.New("management", e.API.Admin())
	if err != nil {
		t.Fatal(err)
	}
	a, err := install.NewApplier(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, append(install.StorageClasses(), install.StorageProfiles()...)); err != nil {
		t.Fatal(err)
	}
	if err := install.StorageProfilesAccept(ctx, a.Dynamic(), install.GateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// build is what `make tools` built of the upstream controllers. Missing, the test fails under CI
// (CI set) and is skipped elsewhere, saying so.
func build(t testing.TB) *realupstream.Build {
	t.Helper()
	b, err := realupstream.Find(cptest.Tools(t))
	if err != nil {
		testkit.Unavailable(t, err)
	}
	return b
}
