package suiterun

import (
	"context"
	"fmt"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/testbed"
)

// The scaling spec's stages, in order.
const (
	StageScaledUp   join.Stage = "scaled-up"   // the pool asks for more workers and its MachineDeployment wants them
	StageGrown      join.Stage = "grown"       // every worker, old and new, passes the join's assertions
	StageScaledDown join.Stage = "scaled-down" // the pool asks for fewer and its MachineDeployment keeps only them
	StageRemoved    join.Stage = "removed"     // nothing of the removed workers is left
)

// ScalingSpecInput is the pool to scale and how far.
type ScalingSpecInput struct {
	Lifecycle
	Pool join.Pool
	// To is the size the pool grows to before it shrinks back to its lane size.
	To int
}

// ScalingSpec registers one spec in lane phase scaling: the pool is scaled up from its lane
// size to To and back down, as an operator scales a pool (its nodeGroups.<pool>.minReplicas
// and maxReplicas, which the cluster-autoscaler holds it to, and the MachineDeployment's
// scale subresource). Scaled up, every worker passes every per-worker assertion of the join
// spec; scaled down, the removed workers leave no Node, Machine, KubevirtMachine, VM, VMI,
// DataVolume, PVC or bootstrap Secret, and the pool that stays passes the join spec again. A
// removed worker's object held by a finalizer no controller removes is a failure of class leak
// at stage removed, decided at once.
func ScalingSpec(_ context.Context, inputGetter func() ScalingSpecInput) {
	It("the pool scales up, every new worker joins, and scaled down it leaves nothing of the removed workers",
		func(spec SpecContext) {
			in := inputGetter()
			p := in.Pool
			rec, r := in.OnPool(spec, PhaseScaling, p)
			from, to := p.Spec.Replicas, in.To
			Expect(to).To(BeNumerically(">", from), "the scaling spec grows pool %s from %d; give it a larger size", p.Name(), from)
			image := in.Tenant.Options().Lane.Workload.Ref()
			timers, err := testbed.Timeouts(in.Clock, in.Tenant.Options().Lane.File, PhaseScaling, NodeStartupTimeout)
			r.Must(err)
			r.holdTimeouts(p, timers, nil)

			By(fmt.Sprintf("scaling pool %s up from %d to %d", p.Name(), from, to))
			r.Must(r.resize(p, to))
			r.Stages.Pass(r.Ctx, StageScaledUp, fmt.Sprintf("nodeGroups.%s.minReplicas=maxReplicas=%d rendered; MachineDeployment %s scaled to %d", p.Name(), to, p.Names.MachineDeployment(), to))
			grown := r.rejoined(r.Ctx, p, to)
			var added []string
			for i := range grown.Machines {
				if !hasMachine(rec, grown.Machines[i].Machine.Name) {
					added = append(added, grown.Machines[i].Machine.Name)
				}
			}
			sort.Strings(added)
			r.Stages.Pass(r.Ctx, StageGrown, fmt.Sprintf("%d workers run a workload pod; new: %s", len(grown.Machines), strings.Join(added, ", ")))
			ExpectPoolJoined(p, grown, to, image)
			Expect(added).To(HaveLen(to-from), "pool %s grew by new Machines", p.Name())

			By(fmt.Sprintf("scaling pool %s down from %d to %d", p.Name(), to, from))
			r.Must(r.resize(p, from))
			survivors := r.scaledDown(p, from)
			var removed []testbed.Worker
			for _, mr := range grown.Machines {
				if !survivors[mr.Machine.Name] {
					removed = append(removed, testbed.WorkerOf(mr))
				}
			}
			Expect(removed).To(HaveLen(to-from), "pool %s kept %v", p.Name(), survivors)
			By("the removed workers leave nothing behind")
			r.Must(r.removed(p, removed))
			after := r.rejoined(r.Ctx, p, from)
			ExpectPoolJoined(p, after, from, image)
			r.Logf("pool %s: scaled %d→%d→%d; removed %d workers", p.Name(), from, to, from, len(removed))
		})
}

// resize makes pool p ask for n workers, as an operator does: minReplicas and maxReplicas on
// the app (what the cluster-autoscaler holds the pool to), rendered, then the
// MachineDeployment's scale subresource.
func (r *Step) resize(p join.Pool, n int) error {
	t := r.lc.Tenant
	gen, err := t.Platform.UpdatePool(r.Ctx, p.Names.Names, p.Name(), func(g map[string]any) {
		g["minReplicas"], g["maxReplicas"] = int64(n), int64(n)
	})
	if err != nil {
		return err
	}
	rd, err := t.Platform.WaitRendered(r.Ctx, p.Names.Names, gen)
	if err != nil {
		return err
	}
	Expect(rd.Ready).To(BeTrue(), "the platform refused pool %s at %d workers: %s", p.Name(), n, rd.HelmRelease)
	return testbed.ScaleMachineDeployment(r.Ctx, t.Options().Management, p.Names, n)
}

// scaledDown waits until the pool's MachineDeployment wants n and only n of its Machines are
// not being deleted, and returns those.
func (r *Step) scaledDown(p join.Pool, n int) map[string]bool {
	ns := p.Names.Namespace
	machines := tenant.Ref{GVK: testbed.MachineGVK, Namespace: ns}
	md := tenant.Ref{GVK: testbed.MachineDeployGVK, Namespace: ns, Name: p.Names.MachineDeployment()}
	keep := map[string]bool{}
	r.Must(r.Stages.Wait(r.Ctx, r.lc.Tenant.Options().Management, StageScaledDown,
		fmt.Sprintf("MachineDeployment %s down to %d", p.Names.MachineDeployment(), n), []tenant.Ref{machines, md},
		func(objs tenant.Objects) (bool, string, error) {
			want := int64(-1)
			if o := objs.Get(md); o != nil {
				want, _, _ = unstructured.NestedInt64(o.Object, "spec", "replicas")
			}
			var staying, going []string
			for _, m := range testbed.Selected(objs[machines], p.Names.Selector()) {
				if m.GetDeletionTimestamp() == nil {
					staying = append(staying, m.GetName())
				} else {
					going = append(going, m.GetName())
				}
			}
			sort.Strings(staying)
			sort.Strings(going)
			detail := fmt.Sprintf("MachineDeployment wants %d; Machines staying %v, deleting %v", want, staying, going)
			if want != int64(n) || len(staying) != n {
				return false, detail, nil
			}
			for _, m := range staying {
				keep[m] = true
			}
			return true, detail, nil
		}))
	return keep
}

// removed waits until nothing of workers is left: Machine, KubevirtMachine, VM, VMI,
// DataVolume, PVC, bootstrap Secrets, Node.
func (r *Step) removed(p join.Pool, workers []testbed.Worker) error {
	var refs []tenant.Ref
	var names []string
	for _, w := range workers {
		refs = append(refs, w.Refs(p.Names.Namespace, p.Kubernetes())...)
		names = append(names, w.Machine)
	}
	return r.Stages.Wait(r.Ctx, r.lc.Tenant.Options().Management, StageRemoved,
		"nothing left of the removed workers "+strings.Join(names, ", "), refs, testbed.Gone(refs, nil))
}
