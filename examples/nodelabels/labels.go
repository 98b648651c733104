// Package nodelabels is an example suite in a Go module of its own: one spec, on every pool,
// that each worker Node carries the well-known labels the kubelet sets on it. It is written
// with the harness's public packages alone (suite, specs, framework/...), as a suite in
// another repository would be; docs/writing-a-suite.md walks through it.
package nodelabels

import (
	"context"
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// Phase is the lane phase the spec runs in, once per pool (suite.yaml: perPool).
const Phase = "labels"

// StageLabelled is the spec's one stage: every worker Node of the pool carries the labels.
const StageLabelled suiterun.Stage = "labelled"

// WellKnown are the labels the kubelet sets on its Node when it registers (k8s.io/api v0.35.4
// core/v1/well_known_labels.go:20, 45-46; k8s.io/kubernetes v1.35.4
// pkg/kubelet/kubelet_node_status.go:301-308).
var WellKnown = []string{corev1.LabelHostname, corev1.LabelOSStable, corev1.LabelArchStable}

// Input is what Spec acts on: the world's lifecycle (the pools' joins, the clock, where
// failures are noted) and one pool.
type Input struct {
	Lifecycle suiterun.Lifecycle
	Pool      join.Pool
}

// Spec registers one spec: every worker Node of the pool, read now from its tenant cluster,
// carries each well-known label; hostname, os and arch say what the Node reports of itself
// (its Hostname address, status.nodeInfo.operatingSystem and .architecture). A missing or
// different label fails at stage labelled, class product-assertion.
func Spec(_ context.Context, inputGetter func() Input) {
	It("every worker Node carries the well-known labels kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch", func(spec SpecContext) {
		in := inputGetter()
		rec, r := in.Lifecycle.OnPool(spec, Phase, in.Pool)
		var wrong []string
		for _, m := range rec.Machines {
			var node corev1.Node
			r.Must(in.Pool.Kubernetes().Client.Get(r.Ctx, client.ObjectKey{Name: m.Machine.Status.NodeRef.Name}, &node))
			wrong = append(wrong, Missing(&node)...)
		}
		if len(wrong) > 0 {
			r.Must(r.Stages.Fail(StageLabelled, verdict.ProductAssertion, strings.Join(wrong, "; ")))
		}
		r.Stages.Pass(r.Ctx, StageLabelled, fmt.Sprintf("%d Nodes carry %s", len(rec.Machines), strings.Join(WellKnown, ", ")))
	})
}

// Missing says, for each well-known label node lacks or holds at another value than the Node
// reports of itself, what is wrong; nil when all are right.
func Missing(node *corev1.Node) []string {
	want := map[string]string{corev1.LabelOSStable: node.Status.NodeInfo.OperatingSystem, corev1.LabelArchStable: node.Status.NodeInfo.Architecture}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeHostName {
			want[corev1.LabelHostname] = a.Address
		}
	}
	var out []string
	for _, l := range WellKnown {
		got, ok := node.Labels[l]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("Node %s has no label %s", node.Name, l))
		case want[l] != "" && got != want[l]:
			out = append(out, fmt.Sprintf("Node %s: label %s=%q, but the Node reports %q", node.Name, l, got, want[l]))
		}
	}
	slices.Sort(out)
	return out
}
