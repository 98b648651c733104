package suiterun

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/capitree"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/platformwatch"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/testbed"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/progress"
)

// World is what a suite's specs act on: the suite process (its lane, clock, management
// cluster, failures), the testbed's tenant with the lane's pools, and the pools phase once it
// started. Run makes it; its bring-up, evidence, keep and teardown are Run's.
type World struct {
	*Suite
	// Tenant is the run's tenant with the lane's classes, conformance clusters and pools
	// (Tenant.Pools), made before any spec runs and brought up by the suite's first node.
	Tenant *testbed.Tenant

	mu    sync.Mutex
	pools *testbed.Pools
	// platform watches the platform under the pools and the lifecycle specs (platform.go),
	// from bringUp to teardown; the joins read its outages. Set once, by newWorld, so mu does
	// not guard it.
	platform *platformwatch.Watch
	t        *testing.T
}

// T is the suite's Go test (the one that called Run): a spec that runs Go subtests, as an
// e2e-framework feature does (suites/suiterun/e2eframework), runs them with T().Run from the spec's own
// goroutine while the suite's specs run. Nil for a World that Run did not make.
func (w *World) T() *testing.T { return w.t }

func newWorld(s *Suite) *World {
	w := &World{Suite: s}
	w.platform = w.newPlatformWatch()
	w.Tenant = testbed.New(testbed.Options{Management: s.Mgmt, Lane: s.Lane, Clock: s.Clock, Run: s.Run, Log: s.Log,
		Diagnostics: s.stream, JoinLog: s.JoinLog(), OnProgress: progress.Joins(s.events, s.replicas()), Platform: w.platform.Outages})
	return w
}

// replicas is each lane pool's size, by name.
func (s *Suite) replicas() map[string]int {
	out := map[string]int{}
	for _, p := range s.Lane.Pools {
		out[p.Name] = p.Replicas
	}
	return out
}

// Pools is the pools phase, once started (nil before the suite's first node ran).
func (w *World) Pools() *testbed.Pools {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pools
}

// EndPools ends the pools phase once every join ended on its own (testbed.Pools.EndWhenJoined):
// a spec in a phase of its own calls it first, and stops no join, wherever it stands among the
// join specs.
func (w *World) EndPools(ctx context.Context) { w.Pools().EndWhenJoined(ctx) }

// InPhase is what a spec in a lane phase of its own acts with (Lifecycle): the tenant,
// the joins, the clock, the failures, the console, and the end of the pools phase before it.
func (w *World) InPhase() Lifecycle {
	return Lifecycle{Tenant: w.Tenant, Pools: w.Pools(), Clock: w.Clock, Failures: w.Failures,
		OnProgress: progress.Joins(w.events, w.replicas()), Log: w.Log, Before: w.EndPools}
}

// InPhaseOn is InPhase for a spec in lane phase phase acting on pool p: when the lane's
// budget puts the phase on the timeline of p's cluster, the spec runs on that timeline and
// ends only its pools phase first, while the other clusters' joins go on (Before).
func (w *World) InPhaseOn(phase string, p join.Pool) Lifecycle {
	lc := w.InPhase()
	// The clock takes the cluster's own phase of the name, else the shared one.
	lc.Timeline = w.Lane.TimelineOf(p.App.Role)
	lc.Before = w.Before(phase, p.App.Role)
	return lc
}

// Before is what a spec in phase, acting on conformance cluster, waits for first: on a shared
// phase, every join ended (EndPools); on the cluster's own timeline, the joins of that
// timeline's clusters (testbed.Pools.EndTimelineWhenJoined), or nothing on a timeline without
// pools (the refusal cluster's).
func (w *World) Before(phase, cluster string) func(context.Context) {
	if !w.Lane.OwnPhase(cluster, phase) {
		return w.EndPools
	}
	if !w.Lane.OwnPhase(cluster, testbed.PhasePools) {
		return nil
	}
	return func(ctx context.Context) { w.Pools().EndTimelineWhenJoined(ctx, cluster) }
}

// JoinSpecs registers one PoolJoinSpec per pool of the lane, each in a container
// labelled with its pool, class, OS, cluster and tenant version.
func (w *World) JoinSpecs(ctx context.Context) { w.JoinSpecsOf(ctx, nil) }

// JoinSpecsOf is JoinSpecs for the pools of is only (nil: every pool): a suite whose lane runs
// clusters on timelines of their own registers each timeline's join specs before its other
// specs.
func (w *World) JoinSpecsOf(ctx context.Context, is func(join.Pool) bool) {
	image := w.Lane.Workload.Ref()
	for _, p := range w.Tenant.Pools {
		if is != nil && !is(p) {
			continue
		}
		labels := ginkgo.Label("pool:"+p.Name(), "class:"+p.Spec.Class, "os:"+p.OS.Name, "cluster:"+p.App.Role, "kubernetes:"+p.App.Release.Version)
		labels = append(labels, p.Spec.Labels...)
		ginkgo.Describe(fmt.Sprintf("pool %s on class %s in %s", p.Name(), p.Spec.Class, p.Cluster()), labels, func() {
			PoolJoinSpec(ctx, func() PoolJoinSpecInput {
				return PoolJoinSpecInput{Pools: w.Pools(), Pool: p, WorkloadImage: image, Failures: w.Failures, Log: w.Log}
			})
		})
	}
}

// bringUp is the tenant phase and, from the first control plane up, the pools phase (every
// pool's join in the background, each from its cluster's coming up); whileJoining runs in the
// pools phase's context once it started.
func (w *World) bringUp(spec context.Context, whileJoining func(context.Context, *World)) {
	w.watchPlatform(spec)
	ps, err := w.Tenant.Up(spec)
	w.mu.Lock()
	w.pools = ps
	w.mu.Unlock()
	// The joins run outside any spec, so Ginkgo's interrupt does not reach them: the signal does
	// (at once when it came while the clusters were coming up).
	w.OnInterrupt(ps.Stop)
	Must(w.Failures, "", err)
	if whileJoining != nil {
		whileJoining(ps.Context(), w)
	}
}

// evidence collects the evidence of a failed spec right after it, inside the diagnostics
// reserve, and attaches it to its failure record.
func (w *World) evidence(ctx context.Context) {
	r := ginkgo.CurrentSpecReport()
	if !r.Failed() {
		return
	}
	v := w.Failures.Judge(r)
	var pools []tenant.PoolNames
	switch {
	case v.Pool != "":
		if p, ok := w.Tenant.Pool(v.Pool); ok {
			pools = append(pools, p.Names)
		}
	case v.Stage != testbed.PhaseTenant && v.Stage != testbed.PhasePools && v.Class != verdict.Leak:
		// A refusal or an API-version disagreement says all in its message; the reserve is
		// kept for the pools.
		return
	}
	evidence := w.stream.Collect(ctx, pools, v.Class, v.Stage)
	if v.Pool != "" {
		evidence = append(evidence, w.poolTree(ctx, v.Pool)...)
	}
	w.Failures.AddEvidence(r.FullText(), evidence)
}

// teardown is the teardown phase: it deletes what the run created and checks that the
// tenant's VMs, VMIs, DataVolumes and PVCs are gone. A leak is recorded as a failure of class
// teardown, not of any spec. When a spec deleted the tenant, nothing is left to delete. A run
// kept for inspection (E2E_KEEP) deletes nothing and writes kept.json.
func (w *World) teardown(spec context.Context) {
	w.Pools().End()
	w.endPlatformWatch()
	if tenantApp, _ := w.Tenant.Created(tenant.Names{}); !tenantApp && len(w.Tenant.Clusters()) == 0 && len(w.Tenant.Classes) == 0 {
		return
	}
	w.clusterTree(spec)
	if keep, why := w.Keeps(ginkgo.CurrentSpecReport().Failed()); keep {
		w.keep(spec, why)
		return
	}
	for _, f := range w.Tenant.Teardown(spec) {
		w.Failures.Add(f)
	}
}

// keep leaves everything the suite created standing (E2E_KEEP): the teardown phase is recorded
// as skipped, and kept.json says how to reach the tenant, its namespace and the objects of
// every failed pool.
func (w *World) keep(spec context.Context, why string) {
	_ = w.Clock.Skip(testbed.PhaseTeardown, why+": kept for inspection")
	kubeconfigs := map[tenant.Names]string{}
	for _, a := range w.Tenant.Apps {
		path, err := w.KeptKubeconfig("tenant-"+a.Names.Cluster(), a.Cluster)
		if err != nil {
			fmt.Fprintf(w.Log, "keep: %v\n", err)
		}
		if path != "" {
			kubeconfigs[a.Names] = path
		}
	}
	k := w.Tenant.Kept(why, kubeconfigs)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(spec), 10*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for _, f := range w.Failures.All() {
		if f.Pool == "" || seen[f.Pool] {
			continue
		}
		seen[f.Pool] = true
		k.Pools = append(k.Pools, w.Tenant.KeptPool(ctx, f.Pool, verdict.Label(f.Class, f.Stage), w.Log))
	}
	if pool := PoolOf(ginkgo.CurrentSpecReport()); pool != "" && !seen[pool] && ginkgo.CurrentSpecReport().Failed() {
		k.Pools = append(k.Pools, w.Tenant.KeptPool(ctx, pool, "failed", w.Log))
	}
	if err := w.WriteKept(k); err != nil {
		fmt.Fprintf(w.Log, "keep: writing kept.json: %v\n", err)
	}
}

// ClusterTreeFile is where a conformance cluster's Cluster API tree is written at the end of
// every run (report.Write puts it in summary.md).
func ClusterTreeFile(cluster string) string {
	return "clusters/management/cluster-tree-" + cluster + ".txt"
}

// clusterTree writes each conformance cluster's tree as clusterctl describe shows it by
// default, before the teardown deletes it.
func (w *World) clusterTree(spec context.Context) {
	for _, a := range w.Tenant.Apps {
		if _, app := w.Tenant.Created(a.Names); !app || spec.Err() != nil {
			continue
		}
		n := a.Names
		if _, err := w.Tree(spec, "cluster "+n.Cluster(), n.Namespace, n.Cluster(), ClusterTreeFile(n.Cluster()), capitree.Options{}); err != nil {
			fmt.Fprintf(w.Log, "cluster tree: %v\n", err)
		}
	}
}

// ClusterTrees writes every conformance cluster's tree now (a spec about to delete them).
func (w *World) ClusterTrees(ctx context.Context) { w.clusterTree(ctx) }

// poolTree writes a failed pool's view of the tree (pools/<pool>/cluster-tree.txt): every
// condition of its MachineDeployment and Machines, their bootstrap and infrastructure objects
// even when Ready, one row per Machine. It returns the path as evidence, or none.
func (w *World) poolTree(ctx context.Context, pool string) []string {
	lp, ok := w.Tenant.Pool(pool)
	if !ok {
		return nil
	}
	if _, app := w.Tenant.Created(lp.Names.Names); !app {
		return nil
	}
	p := lp.Names
	show := []string{"MachineDeployment/" + p.MachineDeployment()}
	var list clusterv1.MachineList
	if err := w.Mgmt.Client.List(ctx, &list, client.InNamespace(p.Namespace), p.Selector()); err == nil {
		for _, m := range list.Items {
			show = append(show, "Machine/"+m.Name)
		}
	}
	rel, err := w.Tree(ctx, "pool "+pool, p.Namespace, p.Cluster(), "pools/"+pool+"/cluster-tree.txt",
		capitree.Options{ShowConditions: strings.Join(show, ","), Echo: true, NoGrouping: true})
	if err != nil {
		fmt.Fprintf(w.Log, "pool %s: cluster tree: %v\n", pool, err)
	}
	if rel == "" {
		return nil
	}
	return []string{rel}
}
