package testbed

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/testkit/tenantenv"
)

// A cluster's pools start joining the moment its control plane is up, while its release is
// still waited for and a slower cluster's control plane is still coming up; the tenant phase
// ends when the last cluster is up.
func TestAClustersJoinsStartWhileASlowerClusterComesUp(t *testing.T) {
	fast, slow := &tenant.App{Role: "classes"}, &tenant.App{Role: "pools"}
	release := make(chan struct{})
	var (
		mu     sync.Mutex
		events []string
	)
	note := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	up := func(ctx context.Context, a *tenant.App, ready func()) error {
		if a == slow {
			select {
			case <-release:
			case <-time.After(10 * time.Second):
				t.Error("the slow cluster waited 10s: the fast cluster's joins never started while it was coming up")
			}
		}
		note("control plane " + a.Role)
		ready()
		note("release " + a.Role)
		if a == fast {
			close(release)
		}
		return nil
	}
	then := func(a *tenant.App) { note("joins " + a.Role) }
	if err := eachUp(context.Background(), []*tenant.App{slow, fast}, up, func() { note("tenant ended") }, then); err != nil {
		t.Fatal(err)
	}
	want := "control plane classes, joins classes, release classes, control plane pools, joins pools, release pools, tenant ended"
	if got := strings.Join(events, ", "); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// An up that never said its control plane was up hands its cluster over once it succeeded,
// before the tenant phase ends. A cluster that fails before its control plane is up ends the
// others' waits; neither its joins nor those of the clusters it stopped start, and the tenant
// phase does not end as up. One that fails after has its joins started, and the phase fails.
func TestOneClusterEndsTheTenantPhaseFirstAndAFailureStartsNoJoins(t *testing.T) {
	var events []string
	one := &tenant.App{Role: "pools"}
	err := eachUp(context.Background(), []*tenant.App{one}, func(context.Context, *tenant.App, func()) error { return nil },
		func() { events = append(events, "tenant ended") }, func(a *tenant.App) { events = append(events, "joins "+a.Role) })
	if err != nil || strings.Join(events, ", ") != "joins pools, tenant ended" {
		t.Fatalf("one cluster: %v, %v", events, err)
	}
	refused := errors.New("the platform refused Kubernetes tenant-e2e/kubernetes-classes")
	bad, other := &tenant.App{Role: "classes"}, &tenant.App{Role: "pools"}
	var mu sync.Mutex
	joined := func(a *tenant.App) {
		mu.Lock()
		events = append(events, "joins "+a.Role)
		mu.Unlock()
	}
	events = nil
	err = eachUp(context.Background(), []*tenant.App{other, bad}, func(ctx context.Context, a *tenant.App, _ func()) error {
		if a == bad {
			return refused
		}
		<-ctx.Done()
		return ctx.Err()
	}, func() { t.Error("the tenant phase ended as up") }, joined)
	if err != refused || len(events) > 0 {
		t.Fatalf("a failed cluster: %v, joins %v; want its error and no joins", err, events)
	}
	events = nil
	err = eachUp(context.Background(), []*tenant.App{bad}, func(_ context.Context, _ *tenant.App, ready func()) error {
		ready()
		return refused
	}, func() { t.Error("the tenant phase ended as up") }, joined)
	if err != refused || strings.Join(events, ", ") != "joins classes" {
		t.Fatalf("a cluster refused after its control plane was up: %v, joins %v; want its error and its joins", err, events)
	}
}

// The pools of a cluster that never came up say so, naming it and its own error; those of a
// cluster whose wait another's failure ended name the tenant phase's error; the phase ends
// without a span and Await reports the first, not a stop.
func TestTheJoinsOfAClusterNotUpSayWhichAndWhy(t *testing.T) {
	tn := simTenant(t, nil)
	if len(tn.Apps) < 2 {
		t.Fatalf("lanes/sim.yaml has %d conformance clusters, want 2", len(tn.Apps))
	}
	ps := tn.newPools(context.Background())
	bad, other := tn.Apps[1], tn.Apps[0]
	own := errors.New("waiting for the control plane: deadline exceeded")
	phase := InPhase(PhaseTenant, "", own)
	ps.notUp(tn.Apps, map[*tenant.App]error{bad: own, other: context.Canceled}, phase)
	for _, p := range tn.Pools {
		_, err := ps.Await(context.Background(), p.Name())
		want := "the tenant phase failed before the tenant cluster " + other.Names.String() + " was up"
		if p.App == bad {
			want = "the tenant cluster " + bad.Names.String() + " did not come up: " + own.Error()
		}
		if err == nil || !strings.HasPrefix(err.Error(), "pool "+p.Name()+": its join never started: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("pool %s: %v; want it to say %q", p.Name(), err, want)
		}
	}
	ps.Stop(errors.New("interrupted by SIGINT"))
	if _, err := ps.Await(context.Background(), tn.Pools[0].Name()); err == nil || strings.Contains(err.Error(), "stopped") {
		t.Errorf("a join that never started was reported as stopped: %v", err)
	}
	ps.End() // no phase started, no watcher: it returns
}

// A cluster's pools may join the moment its control plane is up, while the platform's release
// of it is not Ready yet: Flux answers the release after the chart's hooks, which may be after
// the first workers joined, or failed.
func TestAClustersPoolsMayJoinWhileItsReleaseIsNotReady(t *testing.T) {
	env := tenantenv.Start(t)
	tn := simTenant(t, env.Cluster)
	a := tn.Apps[0]
	env.Namespace(t, a.Names.Namespace)
	env.HelmRelease(t, a.Names, "Unknown", "Progressing", "Running 'install' action with timeout of 5m0s")
	env.ControlPlane(t, a.Names, "Ready")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- tn.appUp(ctx, a, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the cluster's wait ended before its pools could join: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("30s after its control plane was up, the cluster's pools still could not join: they wait for its release")
	}
	if a.Cluster == nil {
		t.Fatal("the pools were let join without the tenant cluster")
	}
	select {
	case err := <-done:
		t.Fatalf("the cluster was up with its release not Ready: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), a.Names.HelmRelease()) {
		t.Errorf("the wait for the release ended with %v; want it to name HelmRelease %s", err, a.Names.HelmRelease())
	}
}

// simTenant is the Tenant of lanes/sim.yaml for run e2eab on management cluster mgmt (nil: none).
func simTenant(t *testing.T, mgmt *cluster.Cluster) *Tenant {
	t.Helper()
	return laneTenant(t, "sim", Options{Management: mgmt})
}

// laneTenant is the Tenant of lanes/<name>.yaml for run e2eab, with o's other options.
func laneTenant(t *testing.T, name string, o Options) *Tenant {
	t.Helper()
	l, err := lane.Load(filepath.Join("..", "..", "lanes", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := tenant.NewRun("e2eab")
	if err != nil {
		t.Fatal(err)
	}
	o.Lane, o.Run = l, run
	return New(o)
}
