// Package simtest starts what the sim's stand-in tests need: a real kube-apiserver (cptest)
// with every CRD under fixtures/crds installed and Established, a harness client, and a
// controller-runtime manager to register stand-ins on.
package simtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cozystack/cozy-e2e/fixtures"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// HostSlotWait bounds how long a test that starts a real Node (internal/sim/node) may wait for
// the host's node slot before its own work begins: the longest another package holds that slot,
// test/simlane's guest-faults run (its bring-up and its 9-minute pools phase, about 11 minutes,
// TestTheRealNodeLaneJudgesGuestFaults), with room. A test's context is HostSlotWait plus what its
// own work takes.
const HostSlotWait = 13 * time.Minute

// Env is one test's control plane.
type Env struct {
	API     *controlplane.APIServer
	Cluster *cluster.Cluster
	Dir     string
}

// Start starts etcd and kube-apiserver, installs every fixtures CRD and waits until each is
// Established. Everything stops when t ends.
func Start(t testing.TB) *Env {
	t.Helper()
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "sim-" + filepath.Base(t.Name())})
	c, err := cluster.New("management", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	InstallCRDs(ctx, t, c.Client)
	// A fresh client: the first one's discovery predates the CRDs.
	if c, err = cluster.New("management", api.Admin()); err != nil {
		t.Fatal(err)
	}
	return &Env{API: api, Cluster: c, Dir: t.TempDir()}
}

// InstallCRDs creates every CRD under fixtures/crds and waits until all are Established.
func InstallCRDs(ctx context.Context, t testing.TB, c client.Client) {
	t.Helper()
	crds, err := fixtures.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range crds {
		if err := c.Create(ctx, f.CRD.DeepCopy()); err != nil {
			t.Fatalf("%s: create %s: %v", f.File, f.CRD.Name, err)
		}
	}
	for _, f := range crds {
		cptest.Established(ctx, t, c, f.CRD.Name, testkit.Left(ctx))
	}
}

// SimEnv is a simenv.Env for tests: faults from spec (E2E_SIM_FAULT syntax), the given
// latencies, container logs under dir.
func SimEnv(t testing.TB, dir, spec string, latencies map[string]time.Duration) *simenv.Env {
	t.Helper()
	set, err := faults.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	e := &simenv.Env{Faults: set, Latencies: latencies, Logs: DirLogs(dir), Dir: dir, Serial: &simenv.SerialPorts{}, Now: time.Now}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// DirLogs places container logs under a folder: <dir>/logs/<namespace>_<pod>_<container>.log.
type DirLogs string

// ContainerLog implements simenv.LogSink.
func (d DirLogs) ContainerLog(namespace, pod, container string) (string, error) {
	dir := filepath.Join(string(d), "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, namespace+"_"+pod+"_"+container+".log"), nil
}

// Manager builds a controller-runtime manager on the env's apiserver (no metrics, no probes,
// no leader election) and runs it once setup has registered the reconcilers. It stops when t
// ends; a manager error fails the test.
func (e *Env) Manager(t testing.TB, setup ...func(manager.Manager) error) manager.Manager {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	skip := true
	mgr, err := ctrl.NewManager(e.Cluster.REST, manager.Options{
		Scheme:                 cluster.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Controller names are unique per process; each test brings its own manager.
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range setup {
		if err := s(mgr); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return mgr
}
