package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/capitree"
	"github.com/cozystack/cozy-e2e/framework/fixture"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/specs"
	"github.com/cozystack/cozy-e2e/suites/internal/suite"
)

// state is what the specs of one suite process share: the fixture's tenant and pools, and the
// refusal cluster rendering beside them.
type state struct {
	s      *suite.Suite
	tenant *fixture.Tenant
	// refusals is the refusal cluster; refusalsCreated says why it was not created.
	refusals        tenant.Names
	refusalsCreated error

	mu    sync.Mutex
	pools *fixture.Pools
}

func newState(s *suite.Suite) *state {
	t := fixture.New(fixture.Options{Management: s.Mgmt, Lane: s.Lane, Clock: s.Clock, Run: s.Run, Log: s.Log,
		Diagnostics: s, JoinLog: s.JoinLog(), OnProgress: s.JoinProgress(replicas(s))})
	return &state{s: s, tenant: t, refusals: s.Run.Cluster(lane.RefusalCluster),
		refusalsCreated: fmt.Errorf("the refusal cluster was not created: the pools phase never started")}
}

func replicas(s *suite.Suite) map[string]int {
	out := map[string]int{}
	for _, p := range s.Lane.Pools {
		out[p.Name] = p.Replicas
	}
	return out
}

// bringUp is the tenant phase and, from the first control plane up, the pools phase
// (every pool's join in the background, each from its cluster's coming up) and, when the
// refusal specs run, the refusal cluster rendering meanwhile.
func (st *state) bringUp(spec context.Context, refusals bool) {
	ps, err := st.tenant.Up(spec)
	st.mu.Lock()
	st.pools = ps
	st.mu.Unlock()
	// The joins run outside any spec, so Ginkgo's interrupt does not reach them: the signal does
	// (at once when it came while the clusters were coming up).
	st.s.OnInterrupt(ps.Stop)
	st.s.Must("", err)
	if refusals {
		// The refusal cluster renders while the pools join, so the refusals phase only judges.
		st.refusalsCreated = st.tenant.CreateCluster(ps.Context(), specs.RefusalCluster(st.refusals, st.s.Lane.Kubernetes.Version))
	}
}

// joins is the pools phase, once started.
func (st *state) joins() *fixture.Pools {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.pools
}

// endPools ends the pools phase (once): the joins are stopped, the informers closed.
func (st *state) endPools() { st.joins().End() }

// teardown is the teardown phase: it deletes what the run created and checks that the
// tenant's VMs, VMIs, DataVolumes and PVCs are gone. A leak is recorded as a failure of class
// teardown, not of any spec. When the deletion spec ran, nothing of the tenant is left to
// delete. A run kept for inspection (E2E_KEEP) deletes nothing and writes kept.json.
func (st *state) teardown(spec context.Context) {
	st.endPools()
	if tenantApp, _ := st.tenant.Created(tenant.Names{}); !tenantApp && len(st.tenant.Clusters()) == 0 && len(st.tenant.Classes) == 0 {
		return
	}
	st.clusterTree(spec)
	if keep, why := st.s.Keeps(CurrentSpecReport().Failed()); keep {
		st.keep(spec, why)
		return
	}
	for _, f := range st.tenant.Teardown(spec, func(ctx context.Context) []string {
		return st.s.Collect(ctx, nil, verdict.Teardown, "teardown")
	}) {
		st.s.Failures.Add(f)
	}
}

// keep leaves everything the suite created standing (E2E_KEEP): the teardown phase is recorded
// as skipped, and kept.json says how to reach the tenant, its namespace and the objects of
// every failed pool.
func (st *state) keep(spec context.Context, why string) {
	_ = st.s.Clock.Skip(fixture.PhaseTeardown, why+": kept for inspection")
	kubeconfigs := map[tenant.Names]string{}
	for _, a := range st.tenant.Apps {
		path, err := st.s.KeptKubeconfig("tenant-"+a.Names.Cluster(), a.Cluster)
		if err != nil {
			fmt.Fprintf(st.s.Log, "keep: %v\n", err)
		}
		if path != "" {
			kubeconfigs[a.Names] = path
		}
	}
	k := st.tenant.Kept(why, kubeconfigs)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(spec), 10*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for _, f := range st.s.Failures.All() {
		if f.Pool == "" || seen[f.Pool] {
			continue
		}
		seen[f.Pool] = true
		k.Pools = append(k.Pools, st.tenant.KeptPool(ctx, f.Pool, verdict.Label(f.Class, f.Stage), st.s.Log))
	}
	if pool := suite.PoolOf(CurrentSpecReport()); pool != "" && !seen[pool] && CurrentSpecReport().Failed() {
		k.Pools = append(k.Pools, st.tenant.KeptPool(ctx, pool, "failed", st.s.Log))
	}
	if err := st.s.WriteKept(k); err != nil {
		fmt.Fprintf(st.s.Log, "keep: writing kept.json: %v\n", err)
	}
}

// clusterTreeFile is where a conformance cluster's Cluster API tree is written at the end of
// every run (report.Write puts it in summary.md).
func clusterTreeFile(cluster string) string {
	return "clusters/management/cluster-tree-" + cluster + ".txt"
}

// clusterTree writes each conformance cluster's tree as clusterctl describe shows it by
// default, before the teardown deletes it.
func (st *state) clusterTree(spec context.Context) {
	for _, a := range st.tenant.Apps {
		if _, app := st.tenant.Created(a.Names); !app || spec.Err() != nil {
			continue
		}
		n := a.Names
		if _, err := st.s.Tree(spec, "cluster "+n.Cluster(), n.Namespace, n.Cluster(), clusterTreeFile(n.Cluster()), capitree.Options{}); err != nil {
			fmt.Fprintf(st.s.Log, "cluster tree: %v\n", err)
		}
	}
}

// poolTree writes a failed pool's view of the tree (pools/<pool>/cluster-tree.txt): every
// condition of its MachineDeployment and Machines, their bootstrap and infrastructure objects
// even when Ready, one row per Machine. It returns the path as evidence, or none.
func (st *state) poolTree(ctx context.Context, pool string) []string {
	lp, ok := st.tenant.Pool(pool)
	if !ok {
		return nil
	}
	if _, app := st.tenant.Created(lp.Names.Names); !app {
		return nil
	}
	p := lp.Names
	show := []string{"MachineDeployment/" + p.MachineDeployment()}
	var list clusterv1.MachineList
	if err := st.s.Mgmt.Client.List(ctx, &list, client.InNamespace(p.Namespace), p.Selector()); err == nil {
		for _, m := range list.Items {
			show = append(show, "Machine/"+m.Name)
		}
	}
	rel, err := st.s.Tree(ctx, "pool "+pool, p.Namespace, p.Cluster(), "pools/"+pool+"/cluster-tree.txt",
		capitree.Options{ShowConditions: strings.Join(show, ","), Echo: true, NoGrouping: true})
	if err != nil {
		fmt.Fprintf(st.s.Log, "pool %s: cluster tree: %v\n", pool, err)
	}
	if rel == "" {
		return nil
	}
	return []string{rel}
}
