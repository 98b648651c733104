package suiterun_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// A spec of its own, written as the specs of this package are: it enters its phase for one
// pool (OnPool: the pool's join record, the phase's context, its stages), fails on a typed
// error with Must, and records its stage. A suite registers it per pool with the input from
// suiterun.World.Lifecycle (examples/nodelabels is one, whole).
func ExampleLifecycle_OnPool() {
	const phase, stage = "workers", join.Stage("counted")
	workersSpec := func(_ context.Context, input func() (suiterun.Lifecycle, join.Pool)) {
		It("the pool has as many Machines as it asked for", func(spec SpecContext) {
			lc, p := input()
			rec, r := lc.OnPool(spec, phase, p)
			if len(rec.Machines) != p.Spec.Replicas {
				r.Must(r.Stages.Fail(stage, verdict.ProductAssertion, fmt.Sprintf("%d Machines of %d", len(rec.Machines), p.Spec.Replicas)))
			}
			r.Stages.Pass(r.Ctx, stage, fmt.Sprintf("%d Machines", len(rec.Machines)))
		})
	}
	_ = workersSpec
}

// The pool a lifecycle spec acts on, before any pool exists: the one the lane gives it, else
// the spec's own rule (scaling takes the first pool of one worker).
func ExampleLanePoolFor() {
	pools := []lane.Pool{{Name: "md0", Replicas: 2}, {Name: "md1", Replicas: 1}, {Name: "md2", Replicas: 3, Lifecycle: suiterun.PhaseRollout}}
	for _, spec := range []string{suiterun.PhaseRemediation, suiterun.PhaseScaling, suiterun.PhaseRollout} {
		fmt.Println(spec, pools[suiterun.LanePoolFor(pools, spec)].Name)
	}
	// Output:
	// remediation md2
	// scaling md1
	// rollout md2
}

// A spec with two checks, one of which cannot always be judged: when a Node carries no
// node.kubernetes.io/instance-type label (no cloud provider set one), that check is skipped with
// its reason and the spec goes on to judge the kubelet versions. The run stays green and its
// verdict.json, junit.xml, summary.md and report.html show the check as skipped, with the reason.
func ExampleStep_SkipCheck() {
	const phase, stage = "kubelets", suiterun.Stage("one-version")
	kubeletsSpec := func(_ context.Context, input func() (suiterun.Lifecycle, join.Pool)) {
		It("every worker Node of the pool runs one kubelet version", func(spec SpecContext) {
			lc, p := input()
			rec, r := lc.OnPool(spec, phase, p)
			versions := map[string]bool{}
			for _, m := range rec.Machines {
				var node corev1.Node
				r.Must(p.Kubernetes().Client.Get(r.Ctx, client.ObjectKey{Name: m.Machine.Status.NodeRef.Name}, &node))
				if _, ok := node.Labels[corev1.LabelInstanceTypeStable]; !ok {
					r.SkipCheck("instance-type label", "Node "+node.Name+" has no "+corev1.LabelInstanceTypeStable+" label: no cloud provider set it")
				}
				versions[node.Status.NodeInfo.KubeletVersion] = true
			}
			if len(versions) > 1 {
				r.Must(r.Stages.Fail(stage, verdict.ProductAssertion, fmt.Sprintf("kubelets at %v", versions)))
			}
			r.Stages.Pass(r.Ctx, stage, fmt.Sprintf("%d Nodes, one kubelet version", len(rec.Machines)))
		})
	}
	_ = kubeletsSpec
}
