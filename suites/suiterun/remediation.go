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

// The remediation spec's stages, in order.
const (
	StageBroken          join.Stage = "broken"           // the worker's VM is stopped
	StageMarkedUnhealthy join.Stage = "marked-unhealthy" // its MachineHealthCheck marked the Machine
	StageReplaced        join.Stage = "replaced"         // the Machine and its VM are gone, a new Machine stands in
	StageRejoined        join.Stage = "rejoined"         // the replacement joined, the pool is whole
)

// ChartMaxUnhealthy is the chart's cluster-wide nodeHealthCheck.maxUnhealthy (cozystack v1.6.1
// packages/apps/kubernetes/values.yaml:307-309): what a pool that sets none runs with.
const ChartMaxUnhealthy = "50%"

// RemediationSpecInput is the pool to break and how to make its MachineHealthCheck able to
// remediate it.
type RemediationSpecInput struct {
	Lifecycle
	Pool join.Pool
	// MaxUnhealthy is set on the pool (nodeGroups.<pool>.maxUnhealthy) when, at the value it
	// runs with, its MachineHealthCheck would never remediate one broken worker (a pool of one
	// at the chart's 50%); empty: such a pool is refused as a configuration error, to be sized.
	MaxUnhealthy string
}

// RemediationSpec registers one spec in lane phase remediation: one worker of the pool breaks
// as it breaks in life (its VM stops: the guest powers off and its kubelet goes silent,
// testbed.StopWorker), and within the MachineHealthCheck's own timeouts plus a stated margin
// the Node goes Unknown, the MachineHealthCheck marks the Machine, the Machine and its VM are
// replaced, and the replacement passes every per-worker assertion of the join spec with the
// pool whole again. It reports the time from the break to the replacement joined. The pool's
// per-group nodeStartupTimeout is set to the lane's value, and its maxUnhealthy when the pool's
// size needs it, saying which. A MachineHealthCheck that will not remediate the broken worker
// (it counts too many unhealthy Machines) is a failure of class remediation, decided at once, at
// the stage the pool could not pass.
func RemediationSpec(_ context.Context, inputGetter func() RemediationSpecInput) {
	It("a broken worker is marked by its MachineHealthCheck, its Machine and VM are replaced, and the replacement joins within the MachineHealthCheck's timeouts",
		func(spec SpecContext) {
			in := inputGetter()
			p := in.Pool
			rec, r := in.OnPool(spec, PhaseRemediation, p)
			file := in.Tenant.Options().Lane.File
			timers, err := testbed.Timeouts(in.Clock, file, PhaseRemediation, NodeMonitorGracePeriod, ReadyUnknownTimeout, NodeStartupTimeout)
			r.Must(err)
			want := r.prepareHealthCheck(p, in.MaxUnhealthy, timers)

			By("breaking one worker: its VM stops, its guest powers off, its kubelet goes silent")
			broken := brokenWorker(rec)
			r.Must(testbed.StopWorker(r.Ctx, in.Tenant.Options().Management, p.Names.Namespace, broken.VM))
			breakAt := time.Now()
			bound := timers[NodeMonitorGracePeriod] + timers[ReadyUnknownTimeout] + timers[NodeStartupTimeout] + remediationMargin
			AddReportEntry("remediation bound", fmt.Sprintf("%s: nodeMonitorGracePeriod %s + readyUnknownTimeout %s + nodeStartupTimeout %s + margin %s",
				bound, timers[NodeMonitorGracePeriod], timers[ReadyUnknownTimeout], timers[NodeStartupTimeout], remediationMargin))
			bctx, cancel := context.WithDeadline(r.Ctx, breakAt.Add(bound))
			defer cancel()
			r.Stages.Bound(bound)
			r.Stages.Pass(bctx, StageBroken, fmt.Sprintf("VirtualMachine %s stopped (spec.runStrategy Halted): Machine %s, Node %s", broken.VM, broken.Machine, broken.Node))

			By("its MachineHealthCheck marks the Machine unhealthy")
			r.Must(r.markedUnhealthy(bctx, p, broken, want))
			By("the Machine and its VM are replaced")
			r.Must(r.replaced(bctx, p, broken, want))
			By("the replacement joins and the pool is whole again")
			after := r.rejoined(bctx, p, p.Spec.Replicas)
			took := time.Since(breakAt)
			var replacement *join.MachineRecord
			for i := range after.Machines {
				if !hasMachine(rec, after.Machines[i].Machine.Name) {
					replacement = &after.Machines[i]
				}
			}
			detail := "no new Machine"
			if replacement != nil {
				detail = fmt.Sprintf("Machine %s joined as Node %s", replacement.Machine.Name, nodeName(replacement))
			}
			r.Stages.Pass(bctx, StageRejoined, detail)
			AddReportEntry("break to replacement joined", took.Round(100*time.Millisecond).String())
			r.Logf("pool %s: worker %s broken; replacement %s in %s (bound %s)", p.Name(), broken.Machine, detail, since(took), bound)

			Expect(replacement).NotTo(BeNil(), "pool %s: no Machine replaced %s", p.Name(), broken.Machine)
			Expect(replacement.Machine.Spec.InfrastructureRef.Name).NotTo(Equal(broken.VM), "the replacement runs a VM of its own")
			ExpectWorker(p, replacement, after.ControlPlaneVersion, in.Tenant.Options().Lane.Workload.Ref())
			ExpectPoolJoined(p, after, p.Spec.Replicas, in.Tenant.Options().Lane.Workload.Ref())
		})
}

// healthCheck is what the spec set on the pool's MachineHealthCheck and why.
type healthCheck struct {
	maxUnhealthy string // the value the pool runs with
	source       string // where it comes from
}

// prepareHealthCheck makes the pool's MachineHealthCheck able to remediate one broken worker and
// run with the lane's timeouts: maxUnhealthy to set when the pool's size needs it (saying so),
// and the timeouts the spec waits on (holdTimeouts).
func (r *Step) prepareHealthCheck(p join.Pool, set string, timers map[string]time.Duration) healthCheck {
	app, err := r.lc.Tenant.Platform.Get(r.Ctx, p.Names.Names)
	r.Must(err)
	file := r.lc.Tenant.Options().Lane.File
	hc := healthCheck{}
	hc.maxUnhealthy, hc.source = maxUnhealthyOf(app, p.Name())
	changes := map[string]any{}
	n, err := remediable(hc.maxUnhealthy, p.Spec.Replicas)
	r.Must(err)
	switch {
	case n >= 1:
		AddReportEntry("maxUnhealthy", fmt.Sprintf("sized: pool %s has %d worker(s); at maxUnhealthy %s (%s) its MachineHealthCheck remediates up to %d at once",
			p.Name(), p.Spec.Replicas, hc.maxUnhealthy, hc.source, n))
	case set == "":
		r.Must(&testbed.ConfigurationError{File: file, Err: fmt.Errorf(
			"pool %s has %d worker(s): at maxUnhealthy %s (%s) its MachineHealthCheck never remediates a broken one; give the remediation spec a larger pool or a maxUnhealthy to set",
			p.Name(), p.Spec.Replicas, hc.maxUnhealthy, hc.source)})
	default:
		if m, err := remediable(set, p.Spec.Replicas); err != nil || m < 1 {
			r.Must(&testbed.ConfigurationError{File: file, Err: fmt.Errorf("maxUnhealthy %q to set on pool %s of %d worker(s) remediates none either (%v)", set, p.Name(), p.Spec.Replicas, err)})
		}
		said := fmt.Sprintf("set: pool %s has %d worker(s); at maxUnhealthy %s (%s) its MachineHealthCheck would never remediate a broken one, so nodeGroups.%s.maxUnhealthy is set to %s",
			p.Name(), p.Spec.Replicas, hc.maxUnhealthy, hc.source, p.Name(), set)
		AddReportEntry("maxUnhealthy", said)
		r.Logf("pool %s: %s", p.Name(), said)
		changes["maxUnhealthy"] = set
		hc.maxUnhealthy, hc.source = set, "nodeGroups."+p.Name()+".maxUnhealthy, set by the spec"
	}
	r.holdTimeouts(p, map[string]time.Duration{NodeStartupTimeout: timers[NodeStartupTimeout], ReadyUnknownTimeout: timers[ReadyUnknownTimeout]}, changes)
	return hc
}

// maxUnhealthyOf is the maxUnhealthy pool runs with by the app, and where it comes from: the
// pool's own, else the app's nodeHealthCheck.maxUnhealthy, else the chart's default.
func maxUnhealthyOf(app *unstructured.Unstructured, pool string) (string, string) {
	if v, ok, _ := unstructured.NestedFieldNoCopy(app.Object, "spec", "nodeGroups", pool, "maxUnhealthy"); ok && v != nil {
		return fmt.Sprint(v), "nodeGroups." + pool + ".maxUnhealthy"
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(app.Object, "spec", "nodeHealthCheck", "maxUnhealthy"); ok && v != nil {
		return fmt.Sprint(v), "nodeHealthCheck.maxUnhealthy"
	}
	return ChartMaxUnhealthy, "the chart's default nodeHealthCheck.maxUnhealthy"
}

// remediable is how many unhealthy Machines of replicas a MachineHealthCheck remediates at
// maxUnhealthy, by Cluster API's own arithmetic: remediation is allowed while the unhealthy
// count is at most maxUnhealthy scaled to the expected Machines, rounded down
// (sigs.k8s.io/cluster-api v1.13.6 internal/controllers/machinehealthcheck/
// machinehealthcheck_controller.go:744-753, 781-787).
func remediable(maxUnhealthy string, replicas int) (int, error) {
	v := intstr.Parse(maxUnhealthy)
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, replicas, false)
	if err != nil {
		return 0, fmt.Errorf("maxUnhealthy %q: %w", maxUnhealthy, err)
	}
	return n, nil
}

// brokenWorker is the worker the spec breaks: the first of the pool's Machines by name.
func brokenWorker(rec *join.Record) testbed.Worker {
	ms := append([]join.MachineRecord(nil), rec.Machines...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].Machine.Name < ms[j].Machine.Name })
	Expect(ms).NotTo(BeEmpty(), "the pool has no Machine to break")
	return testbed.WorkerOf(ms[0])
}

func hasMachine(rec *join.Record, name string) bool {
	for _, m := range rec.Machines {
		if m.Machine.Name == name {
			return true
		}
	}
	return false
}

func nodeName(mr *join.MachineRecord) string {
	if mr.Node != nil {
		return mr.Node.Name
	}
	return mr.Machine.Status.NodeRef.Name
}

// markedUnhealthy waits until the broken worker's MachineHealthCheck marks its Machine
// (HealthCheckSucceeded=False), saying meanwhile where its Node stands. A MachineHealthCheck
// that counts the broken worker among too many unhealthy ones ends the wait at once (class
// remediation): Cluster API then marks no Machine and remediates none, and looks again only when
// a Machine or Node of the pool changes (sigs.k8s.io/cluster-api v1.13.6
// internal/controllers/machinehealthcheck/machinehealthcheck_controller.go:290-345).
func (r *Step) markedUnhealthy(ctx context.Context, p join.Pool, w testbed.Worker, hc healthCheck) error {
	ns := p.Names.Namespace
	machine := tenant.Ref{GVK: testbed.MachineGVK, Namespace: ns, Name: w.Machine}
	mhc := tenant.Ref{GVK: testbed.MachineHealthGVK, Namespace: ns, Name: p.Names.MachineHealthCheck()}
	refs := []tenant.Ref{machine, mhc}
	var node tenant.Ref
	if w.Node != "" {
		node = tenant.Ref{GVK: testbed.NodeGVK, Name: w.Node, In: p.Kubernetes()}
		refs = append(refs, node)
	}
	return r.Stages.Wait(ctx, r.lc.Tenant.Options().Management, StageMarkedUnhealthy,
		"MachineHealthCheck "+p.Names.MachineHealthCheck()+" marking Machine "+w.Machine, refs,
		func(objs tenant.Objects) (bool, string, error) {
			m := objs.Get(machine)
			if m == nil {
				return true, "Machine " + w.Machine + " is gone already (remediated)", nil
			}
			if s, _, _ := tenant.Condition(m, clusterv1.MachineHealthCheckSucceededCondition); s == "False" {
				return true, "Machine " + w.Machine + " " + tenant.DescribeCondition(m, clusterv1.MachineHealthCheckSucceededCondition), nil
			}
			if t := blocked(objs.Get(mhc), p, w, hc); t != nil {
				return false, "", t
			}
			nd := "no Node"
			if n := objs.Get(node); n != nil {
				nd = "Node " + n.GetName() + " " + tenant.DescribeCondition(n, "Ready")
			}
			return false, fmt.Sprintf("%s; Machine %s %s", nd, w.Machine, tenant.DescribeCondition(m, clusterv1.MachineHealthCheckSucceededCondition)), nil
		})
}

// replaced waits until the broken Machine, its KubevirtMachine, VM and VMI are gone and the
// pool counts its replicas again in Machines not being deleted. A MachineHealthCheck that
// marked the Machine and will not remediate it ends the wait at once (class remediation), as
// does an object of the broken worker that only a foreign finalizer holds (class leak).
func (r *Step) replaced(ctx context.Context, p join.Pool, w testbed.Worker, hc healthCheck) error {
	ns := p.Names.Namespace
	machines := tenant.Ref{GVK: testbed.MachineGVK, Namespace: ns}
	mhc := tenant.Ref{GVK: testbed.MachineHealthGVK, Namespace: ns, Name: p.Names.MachineHealthCheck()}
	old := []tenant.Ref{
		{GVK: tenant.KubevirtMachineGVK, Namespace: ns, Name: w.VM},
		{GVK: testbed.VirtualMachineGVK, Namespace: ns, Name: w.VM},
		{GVK: testbed.VMIGVK, Namespace: ns, Name: w.VM},
	}
	refs := append([]tenant.Ref{machines, mhc}, old...)
	return r.Stages.Wait(ctx, r.lc.Tenant.Options().Management, StageReplaced,
		"Machine "+w.Machine+" and VM "+w.VM+" replaced", refs,
		func(objs tenant.Objects) (bool, string, error) {
			var left []*unstructured.Unstructured
			var broken *unstructured.Unstructured
			var fresh []string
			for _, m := range testbed.Selected(objs[machines], p.Names.Selector()) {
				switch {
				case m.GetName() == w.Machine:
					broken = m
					left = append(left, m)
				case m.GetDeletionTimestamp() == nil:
					fresh = append(fresh, m.GetName())
				}
			}
			for _, ref := range old {
				left = append(left, objs[ref]...)
			}
			now := time.Now()
			if broken != nil && broken.GetDeletionTimestamp() == nil {
				if t := blocked(objs.Get(mhc), p, w, hc); t != nil {
					return false, "", t
				}
			}
			for _, o := range left {
				if testbed.Held(o) {
					return false, "", &tenant.Terminal{Class: verdict.Leak, Detail: "the broken worker does not go: " + strings.Join(testbed.Leftovers(left, now), "; ")}
				}
			}
			sort.Strings(fresh)
			detail := fmt.Sprintf("new Machines %v (%d of %d)", fresh, len(fresh), p.Spec.Replicas)
			if broken != nil {
				detail = fmt.Sprintf("Machine %s %s; %s", w.Machine, tenant.DescribeCondition(broken, clusterv1.MachineOwnerRemediatedCondition), detail)
			}
			if len(left) > 0 {
				return false, detail + "; left: " + strings.Join(testbed.Leftovers(left, now), "; "), nil
			}
			return len(fresh) >= p.Spec.Replicas, detail, nil
		})
}

// blocked is the terminal of a MachineHealthCheck that will not remediate the broken worker:
// RemediationAllowed=False while it counts unhealthy Machines (the broken one among them, the
// others having been healthy when it broke), nil otherwise.
func blocked(mhc *unstructured.Unstructured, p join.Pool, w testbed.Worker, hc healthCheck) *tenant.Terminal {
	if mhc == nil {
		return nil
	}
	a, reason, msg := tenant.Condition(mhc, clusterv1.MachineHealthCheckRemediationAllowedCondition)
	expected, _, _ := unstructured.NestedInt64(mhc.Object, "status", "expectedMachines")
	healthy, _, _ := unstructured.NestedInt64(mhc.Object, "status", "currentHealthy")
	if a != "False" || expected-healthy < 1 {
		return nil
	}
	return &tenant.Terminal{Class: verdict.Remediation, Detail: fmt.Sprintf(
		"MachineHealthCheck %s will not remediate broken Machine %s: RemediationAllowed=False %s: %s (the pool runs with maxUnhealthy %s: %s)",
		p.Names.MachineHealthCheck(), w.Machine, reason, msg, hc.maxUnhealthy, hc.source)}
}
