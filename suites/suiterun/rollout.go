package suiterun

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/testbed"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// The rollout spec's stages, in order.
const (
	StageChanged join.Stage = "changed" // the pool renders a new machine template
	StageRolled  join.Stage = "rolled"  // every Machine runs the new template, the old ones are gone
	StageRenewed join.Stage = "renewed" // every worker passes the join's assertions on the new template
)

// RolloutChange is what the rollout spec changes in the pool (nodeGroups.<pool>), in words.
type RolloutChange struct {
	What   string
	Mutate func(group map[string]any)
}

// CPUChange is the default change: one more vCPU per worker (nodeGroups.<pool>.resources.cpu),
// which the platform renders into a new KubevirtMachineTemplate.
func CPUChange() RolloutChange {
	return RolloutChange{What: "resources.cpu one vCPU more", Mutate: func(g map[string]any) {
		res, _ := g["resources"].(map[string]any)
		if res == nil {
			res = map[string]any{}
		}
		cpu := int64(1)
		if s, ok := res["cpu"].(string); ok {
			if q, err := fmt.Sscan(s, &cpu); q != 1 || err != nil {
				cpu = 1
			}
		}
		res["cpu"] = fmt.Sprint(cpu + 1)
		g["resources"] = res
	}}
}

// RolloutSpecInput is the pool to roll and what to change.
type RolloutSpecInput struct {
	Lifecycle
	Pool   join.Pool
	Change RolloutChange
}

// RolloutSpec registers one spec in lane phase rollout: a change to what the pool renders (a
// resource, an image) rolls it: every moment of the rollout keeps at least replicas -
// maxUnavailable workers Ready (Machines not being deleted whose Node is Ready, as Cluster
// API counts them), and it ends with every Machine on the new template and every worker
// passing the join spec's assertions. A moment with fewer Ready workers is a failure at once
// (class product-assertion at stage rolled), naming the Machines then.
func RolloutSpec(_ context.Context, inputGetter func() RolloutSpecInput) {
	It("a change to the pool rolls it, never below replicas - maxUnavailable Ready workers, onto the new template",
		func(spec SpecContext) {
			in := inputGetter()
			p := in.Pool
			rec, r := in.OnPool(spec, PhaseRollout, p)
			md := rec.MachineDeployment
			replicas := p.Spec.Replicas
			maxUnavailable := 0
			if ru := md.Spec.Rollout.Strategy.RollingUpdate; ru.MaxUnavailable != nil {
				var err error
				maxUnavailable, err = intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, replicas, false)
				r.Must(err)
			}
			floor := replicas - maxUnavailable
			oldTemplate := md.Spec.Template.Spec.InfrastructureRef.Name
			AddReportEntry("rollout", fmt.Sprintf("%s; replicas %d, maxUnavailable %d: at least %d Ready at every moment", in.Change.What, replicas, maxUnavailable, floor))

			t := in.Tenant
			timers, err := testbed.Timeouts(in.Clock, t.Options().Lane.File, PhaseRollout, NodeStartupTimeout)
			r.Must(err)
			r.holdTimeouts(p, timers, nil)

			By("changing the pool: " + in.Change.What)
			gen, err := t.Platform.UpdatePool(r.Ctx, p.Names.Names, p.Name(), in.Change.Mutate)
			r.Must(err)
			rd, err := t.Platform.WaitRendered(r.Ctx, p.Names.Names, gen)
			r.Must(err)
			Expect(rd.Ready).To(BeTrue(), "the platform refused pool %s with %s: %s", p.Name(), in.Change.What, rd.HelmRelease)
			newTemplate := r.changed(p, oldTemplate)

			By("the pool rolls onto " + newTemplate + ", never below " + fmt.Sprint(floor) + " Ready workers")
			low := r.rolled(p, newTemplate, replicas, floor)
			AddReportEntry("fewest Ready workers during the rollout", fmt.Sprint(low))
			after := r.rejoined(r.Ctx, p, replicas)
			for _, m := range after.Machines {
				Expect(hasMachine(rec, m.Machine.Name)).To(BeFalse(), "Machine %s of the old template is still in the pool", m.Machine.Name)
			}
			r.Stages.Pass(r.Ctx, StageRenewed, fmt.Sprintf("%d workers on %s run a workload pod", len(after.Machines), newTemplate))
			Expect(after.MachineDeployment.Spec.Template.Spec.InfrastructureRef.Name).To(Equal(newTemplate))
			ExpectPoolJoined(p, after, replicas, t.Options().Lane.Workload.Ref())
			r.Logf("pool %s: rolled from %s to %s (%s); fewest Ready workers %d, floor %d", p.Name(), oldTemplate, newTemplate, in.Change.What, low, floor)
		})
}

// changed waits until the pool's MachineDeployment runs a machine template other than old,
// and returns its name.
func (r *Step) changed(p join.Pool, old string) string {
	md := tenant.Ref{GVK: testbed.MachineDeployGVK, Namespace: p.Names.Namespace, Name: p.Names.MachineDeployment()}
	var now string
	r.Must(r.Stages.Wait(r.Ctx, r.lc.Tenant.Options().Management, StageChanged, "MachineDeployment "+md.Name+" on a new machine template",
		[]tenant.Ref{md}, func(objs tenant.Objects) (bool, string, error) {
			o := objs.Get(md)
			if o == nil {
				return false, "MachineDeployment not found", nil
			}
			now, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "infrastructureRef", "name")
			return now != old, "infrastructureRef " + now, nil
		}))
	return now
}

// rolled waits until every Machine of the pool not being deleted runs template (its
// MachineSet's), replicas of them with a Ready Node and none of another template left; at every
// change it counts the Ready workers, and fewer than floor ends it at once. It returns the
// fewest it saw.
func (r *Step) rolled(p join.Pool, template string, replicas, floor int) int {
	ns := p.Names.Namespace
	mgmt := r.lc.Tenant.Options().Management
	machines := tenant.Ref{GVK: testbed.MachineGVK, Namespace: ns}
	sets := tenant.Ref{GVK: testbed.MachineSetGVK, Namespace: ns}
	nodes := tenant.Ref{GVK: testbed.NodeGVK, In: p.Kubernetes()}
	low := replicas
	r.Must(r.Stages.Wait(r.Ctx, mgmt, StageRolled, fmt.Sprintf("pool %s on %s", p.Name(), template),
		[]tenant.Ref{machines, sets, nodes}, func(objs tenant.Objects) (bool, string, error) {
			setTemplate := map[string]string{}
			for _, s := range objs[sets] {
				setTemplate[s.GetName()], _, _ = unstructured.NestedString(s.Object, "spec", "template", "spec", "infrastructureRef", "name")
			}
			ready := map[string]bool{}
			for _, n := range objs[nodes] {
				if st, _, _ := tenant.Condition(n, "Ready"); st == "True" {
					ready[n.GetName()] = true
				}
			}
			var up, onNew, others []string
			for _, m := range testbed.Selected(objs[machines], p.Names.Selector()) {
				set := m.GetLabels()[clusterv1.MachineSetNameLabel]
				node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
				deleting := m.GetDeletionTimestamp() != nil
				if !deleting && node != "" && ready[node] {
					up = append(up, m.GetName())
				}
				if setTemplate[set] == template && !deleting {
					onNew = append(onNew, m.GetName())
				} else {
					others = append(others, m.GetName())
				}
			}
			sort.Strings(up)
			low = min(low, len(up))
			detail := fmt.Sprintf("%d Ready (%s); on the new template %d of %d; others left %v", len(up), strings.Join(up, ", "), len(onNew), replicas, others)
			if len(up) < floor {
				return false, detail, &tenant.Terminal{Class: verdict.ProductAssertion, Detail: fmt.Sprintf(
					"only %d workers Ready at %s, fewer than replicas - maxUnavailable = %d: %s", len(up), time.Now().UTC().Format("15:04:05.000"), floor, detail)}
			}
			newUp := 0
			for _, m := range onNew {
				for _, u := range up {
					if m == u {
						newUp++
					}
				}
			}
			return len(others) == 0 && newUp == replicas, detail, nil
		}))
	return low
}
