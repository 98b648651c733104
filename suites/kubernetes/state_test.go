package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/capitree"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/framework/verdict/report"
	"github.com/cozystack/cozy-e2e/suites/internal/suite"
)

// state is what the specs of one suite run share: the platform, the clusters' names, the
// tenant cluster, and the pools' joins running in the background.
type state struct {
	s        *suite.Suite
	platform tenant.Platform
	// names is the conformance cluster; refusals the cluster of the refusal specs.
	names, refusals tenant.Names
	pools           []poolRun
	tenant          *cluster.Cluster
	classes         []string // the NodeGroupClasses this run created
	// restores are the refusal cluster's pools a refusal spec changed, as they were before:
	// the next write to the app puts them back.
	restores map[string]map[string]any

	created         struct{ tenant, cluster, refusals bool }
	refusalsCreated error // why the refusal cluster could not be created

	mu      sync.Mutex
	joins   map[string]*joinRun
	watcher *join.Watcher
	span    *budget.Span // the pools phase
	pctx    context.Context
	pcancel context.CancelFunc
	ended   bool
}

// poolRun is one lane pool as the suite follows it.
type poolRun struct {
	spec    tenant.PoolSpec
	os      osfamily.Family
	osErr   error  // why the pool's class has no known family
	kubelet string // the kubelet version its workers must report
	names   tenant.PoolNames
	labels  []string // the lane's extra labels for the pool's spec
}

// joinRun is one pool's join in the background, and the record of the pool taken the moment
// it joined.
type joinRun struct {
	done chan struct{}
	rec  *join.Record
	err  error
}

func newState(s *suite.Suite) *state {
	st := &state{s: s, platform: tenant.Platform{Mgmt: s.Mgmt, Log: s.Log},
		names: s.Run.Cluster("pools"), refusals: s.Run.Cluster("refusals"), joins: map[string]*joinRun{},
		restores: map[string]map[string]any{}}
	for i, p := range tenant.PoolsFromLane(s.Lane) {
		os, err := tenant.ClassFamily(s.Lane, p.Class) // lane validation refuses this; the pool's spec fails on it
		st.pools = append(st.pools, poolRun{spec: p, os: os, osErr: err, kubelet: tenant.KubeletPatch(s.Lane, p.Class),
			names: st.names.Pool(p.Name), labels: s.Lane.Pools[i].Labels})
	}
	return st
}

// phase starts lane phase name under parent; the spec fails (class deadline) when the budget
// left cannot hold it.
func (st *state) phase(parent context.Context, name string) (context.Context, *budget.Span) {
	ctx, span, err := st.s.Clock.Phase(parent, name)
	st.s.Must("", err)
	return ctx, span
}

// bringUp is the tenant phase: the Tenant app, the lane's classes, the conformance cluster and
// its control plane; then it starts the pools phase, every pool's join in parallel.
func (st *state) bringUp(spec context.Context) {
	ctx, span := st.phase(spec, "tenant")
	var err error
	defer func() { span.End(err) }()
	if err = st.platform.CreateTenant(ctx, st.s.Run); err != nil {
		st.s.MustIn("tenant", "", err)
	}
	st.created.tenant = true
	if err = st.s.StartDiagnostics(ctx, st.s.Run.Namespace()); err != nil {
		st.s.MustIn("tenant", "", err)
	}
	if st.classes, err = st.platform.EnsureClasses(ctx, st.s.Lane); err != nil {
		st.s.MustIn("tenant", "", err)
	}
	var specs []tenant.PoolSpec
	for _, p := range st.pools {
		if p.osErr != nil {
			st.s.Must(p.spec.Name, &suite.ConfigurationError{File: st.s.Lane.File, Err: p.osErr})
		}
		st.s.WatchPool(p.names)
		specs = append(specs, p.spec)
	}
	if err = st.platform.CreateCluster(ctx, tenant.ClusterSpec{Names: st.names, Version: st.s.Lane.Kubernetes.Version, Pools: specs}); err != nil {
		st.s.MustIn("tenant", "", err)
	}
	st.created.cluster = true
	if st.tenant, err = st.platform.WaitControlPlane(ctx, st.names); err != nil {
		st.s.MustIn("tenant", "", err)
	}
	// The release is Ready: its history says whether Flux had to remediate it on the way.
	note, err := st.platform.CheckReleaseHistory(ctx, st.names, st.s.Lane.Policy.Remediation.TenantPolicy())
	if err != nil {
		st.s.MustIn("tenant", "", err)
	}
	if note != "" {
		fmt.Fprintln(st.s.Log, note)
	}
	if err = st.s.WatchTenant(ctx, st.tenant); err != nil {
		st.s.MustIn("tenant", "", err)
	}
	span.End(nil)
	st.startPools(spec)
}

// startPools starts the pools phase and one join per pool. The phase outlives the BeforeAll
// that starts it (its context is not the spec's); endPools ends it.
func (st *state) startPools(spec context.Context) {
	ctx, span := st.phase(context.WithoutCancel(spec), "pools")
	ctx, cancel := context.WithCancel(ctx)
	oses := []osfamily.Family{}
	replicas := map[string]int{}
	for _, p := range st.pools {
		oses = append(oses, p.os)
		replicas[p.spec.Name] = p.spec.Replicas
	}
	w, err := join.Start(ctx, join.Options{Management: st.s.Mgmt, Tenant: st.tenant, Namespace: st.names.Namespace,
		OSes: oses, Clock: st.s.Clock, Log: st.s.JoinLog(), OnProgress: st.s.JoinProgress(replicas), Consoles: st.s.Consoles()})
	if err != nil {
		cancel()
		span.End(err)
		st.s.MustIn("pools", "", err)
	}
	st.mu.Lock()
	st.watcher, st.span, st.pctx, st.pcancel = w, span, ctx, cancel
	st.mu.Unlock()
	// The refusal cluster renders while the pools join, so the refusals phase only judges.
	st.refusalsCreated = st.platform.CreateCluster(ctx, refusalSpec(st))
	st.created.refusals = st.refusalsCreated == nil
	for _, p := range st.pools {
		jr := &joinRun{done: make(chan struct{})}
		st.joins[p.spec.Name] = jr
		pool := join.Pool{Names: p.names, Class: p.spec.Class, OS: p.os, Replicas: p.spec.Replicas,
			Console: st.s.Consoles() != nil, WorkloadImage: st.s.Lane.Workload.Ref()}
		go func() {
			defer close(jr.done)
			defer GinkgoRecover()
			res, err := w.Join(ctx, pool)
			if err != nil {
				jr.err = err
				return
			}
			jr.rec, jr.err = join.Inspect(ctx, join.InspectOptions{Management: st.s.Mgmt, Tenant: st.tenant}, pool, res)
		}()
	}
}

// await is pool's join outcome and record; it ends early when the spec is interrupted.
func (st *state) await(spec context.Context, pool string) (*join.Record, error) {
	jr, ok := st.joins[pool]
	if !ok {
		return nil, fmt.Errorf("pool %s: its join never started (the tenant phase failed first)", pool)
	}
	select {
	case <-jr.done:
		return jr.rec, jr.err
	case <-spec.Done():
		return nil, fmt.Errorf("pool %s: the spec ended (%v) while the pool was joining", pool, context.Cause(spec))
	}
}

// endPools ends the pools phase (once): the joins are stopped, the informers closed.
func (st *state) endPools() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended || st.span == nil {
		return
	}
	st.ended = true
	var errs []error
	for _, jr := range st.joins {
		select {
		case <-jr.done:
			errs = append(errs, jr.err)
		default:
		}
	}
	st.pcancel()
	for _, jr := range st.joins {
		<-jr.done
	}
	st.watcher.Close()
	st.span.End(errors.Join(errs...))
}

// teardown is the teardown phase: it deletes what the run created and checks that the
// tenant's VMs, VMIs, DataVolumes and PVCs are gone. A leak is recorded as a failure of class
// teardown, not of any spec.
func (st *state) teardown(spec context.Context) {
	st.endPools()
	if !st.created.tenant {
		return
	}
	st.clusterTree(spec)
	if keep, why := st.s.Keeps(CurrentSpecReport().Failed()); keep {
		st.keep(spec, why)
		return
	}
	var first error
	fail := func(err error, evidence []string) {
		if err == nil {
			return
		}
		if first == nil {
			first = err
		}
		st.s.Failures.Add(verdict.Failure{Spec: "teardown", Class: verdict.Teardown, Stage: "teardown", Message: err.Error(), Evidence: evidence})
	}
	ctx, span, err := st.s.Clock.Phase(spec, "teardown")
	if err != nil {
		fail(err, nil)
		return
	}
	defer func() { span.End(first) }()
	if st.created.cluster {
		fail(st.platform.DeleteApp(ctx, st.names), nil)
	}
	if st.created.refusals {
		fail(st.platform.DeleteApp(ctx, st.refusals), nil)
	}
	if err := st.platform.WaitDrained(ctx, st.s.Run.Namespace()); err != nil {
		fail(err, st.s.Collect(spec, nil, verdict.Teardown, "teardown"))
	}
	// The last deletes are single requests: they go out even when the drain used up the
	// phase, bounded by the run's root deadline.
	rctx, cancel := st.s.Clock.Root(context.WithoutCancel(spec))
	defer cancel()
	fail(st.platform.DeleteTenant(rctx, st.s.Run), nil)
	fail(st.platform.DeleteClasses(rctx, st.classes), nil)
}

// keep leaves everything the suite created standing (E2E_KEEP): the teardown phase is recorded
// as skipped, and kept.json says how to reach the tenant, its namespace and the objects of
// every failed pool.
func (st *state) keep(spec context.Context, why string) {
	_ = st.s.Clock.Skip("teardown", why+": kept for inspection")
	k := report.Kept{Reason: why, Tenant: st.s.Run.TenantName(), Namespace: st.s.Run.Namespace(), Classes: st.classes}
	kc := report.KeptCluster{Name: st.names.Cluster()}
	if path, err := st.s.KeptKubeconfig("tenant-"+st.names.Cluster(), st.tenant); err == nil {
		kc.Kubeconfig = path
	} else {
		fmt.Fprintf(st.s.Log, "keep: %v\n", err)
	}
	k.Clusters = append(k.Clusters, kc)
	if st.created.refusals {
		k.Clusters = append(k.Clusters, report.KeptCluster{Name: st.refusals.Cluster()})
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(spec), 10*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for _, f := range st.s.Failures.All() {
		if f.Pool == "" || seen[f.Pool] {
			continue
		}
		seen[f.Pool] = true
		k.Pools = append(k.Pools, st.keptPool(ctx, f.Pool, verdict.Label(f.Class, f.Stage)))
	}
	if pool := suite.PoolOf(CurrentSpecReport()); pool != "" && !seen[pool] && CurrentSpecReport().Failed() {
		k.Pools = append(k.Pools, st.keptPool(ctx, pool, "failed"))
	}
	if err := st.s.WriteKept(k); err != nil {
		fmt.Fprintf(st.s.Log, "keep: writing %s: %v\n", report.KeptFile, err)
	}
}

// keptPool names a failed pool's objects: its MachineDeployment, Machines and their VMIs.
func (st *state) keptPool(ctx context.Context, pool, failure string) report.KeptPool {
	p := st.names.Pool(pool)
	kp := report.KeptPool{Pool: pool, Cluster: st.names.Cluster(), Failure: failure, MachineDeployment: p.MachineDeployment()}
	var list clusterv1.MachineList
	if err := st.s.Mgmt.Client.List(ctx, &list, client.InNamespace(p.Namespace), p.Selector()); err != nil {
		fmt.Fprintf(st.s.Log, "keep: listing the Machines of pool %s: %v\n", pool, err)
		return kp
	}
	for _, m := range list.Items {
		kp.Machines = append(kp.Machines, m.Name)
		if m.Spec.InfrastructureRef.Name != "" {
			kp.VMIs = append(kp.VMIs, m.Spec.InfrastructureRef.Name)
		}
	}
	return kp
}

// clusterTreeFile is where the conformance cluster's Cluster API tree is written at the end of
// every run (report.Write puts it in summary.md).
func clusterTreeFile(cluster string) string {
	return "clusters/management/cluster-tree-" + cluster + ".txt"
}

// clusterTree writes the conformance cluster's tree as clusterctl describe shows it by default,
// before the teardown deletes it.
func (st *state) clusterTree(spec context.Context) {
	if !st.created.cluster || spec.Err() != nil {
		return
	}
	if _, err := st.s.Tree(spec, "cluster "+st.names.Cluster(), st.names.Namespace, st.names.Cluster(), clusterTreeFile(st.names.Cluster()), capitree.Options{}); err != nil {
		fmt.Fprintf(st.s.Log, "cluster tree: %v\n", err)
	}
}

// poolTree writes a failed pool's view of the tree (pools/<pool>/cluster-tree.txt): every
// condition of its MachineDeployment and Machines, their bootstrap and infrastructure objects
// even when Ready, one row per Machine. It returns the path as evidence, or none.
func (st *state) poolTree(ctx context.Context, pool string) []string {
	if !st.created.cluster {
		return nil
	}
	p := st.names.Pool(pool)
	show := []string{"MachineDeployment/" + p.MachineDeployment()}
	var list clusterv1.MachineList
	if err := st.s.Mgmt.Client.List(ctx, &list, client.InNamespace(p.Namespace), p.Selector()); err == nil {
		for _, m := range list.Items {
			show = append(show, "Machine/"+m.Name)
		}
	}
	rel, err := st.s.Tree(ctx, "pool "+pool, p.Namespace, st.names.Cluster(), "pools/"+pool+"/cluster-tree.txt",
		capitree.Options{ShowConditions: strings.Join(show, ","), Echo: true, NoGrouping: true})
	if err != nil {
		fmt.Fprintf(st.s.Log, "pool %s: cluster tree: %v\n", pool, err)
		return nil
	}
	return []string{rel}
}
