package testbed

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Lane phases the testbed runs in.
const (
	PhaseTenant   = "tenant"
	PhasePools    = "pools"
	PhaseTeardown = "teardown"
)

// Options say where the tenant lives and who hears about it.
type Options struct {
	Management *cluster.Cluster
	Lane       *lane.Lane
	Clock      *budget.Clock
	Run        tenant.Run
	// Log receives progress lines for people (the platform's waits); nil discards them.
	Log io.Writer
	// Diagnostics streams the tenant's evidence while it lives; nil streams nothing.
	Diagnostics Diagnostics
	// JoinLog receives the joins' own progress lines and OnProgress hears each change of a
	// pool's stage (join.Options); either may be nil.
	JoinLog    io.Writer
	OnProgress func(join.Progress)
	// Platform names the platform components unavailable now (a platformwatch.Watch's Outages); a
	// pool whose wait runs out while one is fails with class platform (join.Options.Platform).
	// Nil: pools are judged without it.
	Platform func(context.Context) []string
}

// Diagnostics is what streams a tenant's evidence: from the tenant namespace's creation, then
// each pool's objects and consoles, then each tenant cluster. The tenant is handed it as a
// value (Options.Diagnostics) and tells it what came up; it is the suite's stream, not the
// suite (suiterun hands over its diagnostics' stream, which calls nothing back).
type Diagnostics interface {
	StartDiagnostics(ctx context.Context, namespace string) error
	WatchPool(p tenant.PoolNames)
	// WatchTenant streams the tenant cluster c of the conformance cluster app, which the lane
	// calls role (pools[].cluster).
	WatchTenant(ctx context.Context, role string, app tenant.Names, c *cluster.Cluster) error
	// Consoles is the run's console hub, once StartDiagnostics started it (nil before): the
	// joins judge the guests' boot from the consoles it reads.
	Consoles() *serialconsole.Hub
	// Collect runs the on-failure collectors for pools (none: the cluster-wide ones) and names
	// the files that show a failure of class at stage: the teardown asks it for a leak's.
	Collect(ctx context.Context, pools []tenant.PoolNames, class verdict.Class, stage string) []string
}

// Tenant is the run's tenant: its Tenant app, the lane's classes, the conformance clusters
// with the lane's pools, and the other clusters made in it. It remembers what it created, so
// Teardown deletes exactly that, whatever failed on the way.
type Tenant struct {
	o        Options
	Platform tenant.Platform
	// Apps are the conformance clusters, in the order of their first pool in the lane.
	Apps  []*tenant.App
	Pools []join.Pool
	// Classes are the NodeGroupClasses this run created.
	Classes []string

	mu       sync.Mutex
	tenant   bool           // the Tenant app was created and not yet deleted
	deleted  bool           // the Tenant app was deleted outside Teardown (the deletion spec)
	clusters []tenant.Names // the Kubernetes apps created and not yet deleted
}

// New derives the tenant's names, conformance clusters and pools from the lane; nothing is
// created.
func New(o Options) *Tenant {
	t := &Tenant{o: o, Platform: tenant.Platform{Mgmt: o.Management, Log: o.Log}}
	apps := map[string]*tenant.App{}
	for _, c := range o.Lane.ConformanceClusters() {
		a := &tenant.App{Role: c.Name, Names: o.Run.Cluster(c.Name), Release: *c.Kubernetes}
		apps[c.Name] = a
		t.Apps = append(t.Apps, a)
	}
	for _, p := range o.Lane.Pools {
		os, err := tenant.ClassFamily(o.Lane, p.Class) // lane validation refuses this; the pool's spec fails on it
		if err != nil {
			err = &ConfigurationError{File: o.Lane.File, Err: err}
		}
		a := apps[p.ClusterName()]
		a.Pools = append(a.Pools, p.Name)
		t.Pools = append(t.Pools, join.Pool{Spec: p, OS: os, OSErr: err, Kubelet: tenant.PoolKubelet(o.Lane, p),
			Names: a.Names.Pool(p.Name), App: a})
	}
	return t
}

// Options are the options the tenant was made with.
func (t *Tenant) Options() Options { return t.o }

// Consoles is the run's console hub, nil when the run reads no console.
func (t *Tenant) Consoles() *serialconsole.Hub {
	if t.o.Diagnostics == nil {
		return nil
	}
	return t.o.Diagnostics.Consoles()
}

// Up is lane phase tenant on a Tenant made with New (the Tenant app, the lane's classes, every
// conformance cluster with its pools, and their control planes) and, from the moment the first
// control plane is up, lane phase pools. The clusters are created one after the other, then
// waited for (control plane, release, history) at the same time; the first that fails ends the
// others' waits. Each cluster's pools start joining as soon as its control plane is up, while
// its release is still waited for and without waiting for the other clusters: a worker that
// fails before the platform's release is Ready is judged then, not once it is. The pools phase
// starts with the first control plane up, the tenant phase ends with the last cluster. The
// pools phase is returned even on error, so End can end what did start; the joins of a cluster
// whose control plane never came up say so, naming it. The pools phase outlives ctx (a Ginkgo
// node that starts it returns at once); End ends it.
func (t *Tenant) Up(parent context.Context) (ps *Pools, err error) {
	ps = t.newPools(parent)
	ctx, span, err := t.o.Clock.Phase(parent, PhaseTenant)
	if err != nil {
		ps.notUp(t.Apps, nil, err)
		return ps, err
	}
	defer func() { span.End(err) }()
	in := func(err error) error { return InPhase(PhaseTenant, "", err) }
	var (
		mu     sync.Mutex
		failed = map[*tenant.App]error{}
		joins  error // the first cluster whose joins did not start
	)
	err = in(t.create(ctx))
	if err == nil {
		up := func(ctx context.Context, a *tenant.App, ready func()) error {
			err := t.appUp(ctx, a, ready)
			if err != nil {
				mu.Lock()
				failed[a] = err
				mu.Unlock()
			}
			return err
		}
		err = in(eachUp(ctx, t.Apps, up, func() {
			span.End(nil)
			ps.overlapped(time.Now())
		}, func(a *tenant.App) {
			if err := ps.join(a); err != nil {
				mu.Lock()
				joins = cmp.Or(joins, err)
				mu.Unlock()
			}
		}))
	}
	if err != nil {
		ps.notUp(t.Apps, failed, err)
		return ps, err
	}
	return ps, joins
}

// create is the tenant phase up to the conformance clusters' creation: the Tenant app, the
// lane's classes, each cluster with its pools.
func (t *Tenant) create(ctx context.Context) error {
	if err := t.Platform.CreateTenant(ctx, t.o.Run); err != nil {
		return err
	}
	t.mu.Lock()
	t.tenant = true
	t.mu.Unlock()
	if d := t.o.Diagnostics; d != nil {
		if err := d.StartDiagnostics(ctx, t.o.Run.Namespace()); err != nil {
			return err
		}
	}
	var err error
	if t.Classes, err = t.Platform.EnsureClasses(ctx, t.o.Lane); err != nil {
		return err
	}
	for _, p := range t.Pools {
		if p.OSErr != nil {
			return p.OSErr
		}
	}
	// The installed platform has the last word on the tenant versions it offers.
	offered, err := t.Platform.OfferedVersions(ctx)
	if err != nil {
		return err
	}
	if err := tenant.CheckOffered(t.o.Lane, offered); err != nil {
		return &ConfigurationError{File: t.o.Lane.File, Err: err}
	}
	for _, a := range t.Apps {
		var specs []lane.Pool
		for _, p := range t.PoolsOf(a) {
			if d := t.o.Diagnostics; d != nil {
				d.WatchPool(p.Names)
			}
			specs = append(specs, p.Spec)
		}
		if err := t.CreateCluster(ctx, tenant.ClusterSpec{Names: a.Names, Version: a.Release.Version, Pools: specs}); err != nil {
			return err
		}
	}
	return nil
}

// appUp waits for conformance cluster a: its control plane, at which the diagnostics stream
// its tenant cluster and ready is called (its pools may join from then on), then its release
// Ready with a history the lane's policy accepts.
func (t *Tenant) appUp(ctx context.Context, a *tenant.App, ready func()) (err error) {
	if a.Cluster, err = t.Platform.WaitControlPlane(ctx, a.Names); err != nil {
		return err
	}
	if d := t.o.Diagnostics; d != nil {
		if err := d.WatchTenant(ctx, a.Role, a.Names, a.Cluster); err != nil {
			return err
		}
	}
	ready()
	// Flux answers the release after the chart's hooks ran, which may be after the control plane
	// is up (it installs without waiting) and after the first workers joined; once it is Ready,
	// its history says whether Flux had to remediate it on the way.
	rd, err := t.Platform.WaitRendered(ctx, a.Names, 1)
	if err != nil {
		return err
	}
	if !rd.Ready {
		return fmt.Errorf("tenant: the platform refused Kubernetes %s (%s): %s", a.Names, a, rd.HelmRelease)
	}
	note, err := t.Platform.CheckReleaseHistory(ctx, a.Names, t.o.Lane.Policy.Remediation.TenantPolicy())
	if err != nil {
		return err
	}
	if note != "" && t.o.Log != nil {
		fmt.Fprintln(t.o.Log, note)
	}
	return nil
}

// eachUp runs up on every app at once. up calls ready once the app's control plane is up, and
// eachUp hands the app to then at that moment, while up goes on; an up that returns nil
// without calling ready is handed over then. When the last app's up returned nil, last runs.
// It returns the first error of up, which ends the others' context, so their errors of that
// ending are not the one reported; an app whose up failed before ready is never handed over.
// then and last run outside ctx's life and must not block.
func eachUp(ctx context.Context, apps []*tenant.App, up func(context.Context, *tenant.App, func()) error, last func(), then func(*tenant.App)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		left  = len(apps)
	)
	for _, a := range apps {
		wg.Go(func() {
			var handed sync.Once
			hand := func() { handed.Do(func() { then(a) }) }
			err := up(ctx, a, hand)
			mu.Lock()
			if err != nil && first == nil {
				first = err
			}
			left--
			all := err == nil && left == 0 && first == nil
			mu.Unlock()
			if err != nil {
				cancel()
				return
			}
			hand()
			if all {
				last()
			}
		})
	}
	wg.Wait()
	return first
}

// String names the tenant.
func (t *Tenant) String() string {
	return fmt.Sprintf("Tenant %s (namespace %s)", t.o.Run.TenantName(), t.o.Run.Namespace())
}
