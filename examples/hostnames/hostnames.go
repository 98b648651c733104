// Package hostnames is an example suite whose one check is a feature written with
// sigs.k8s.io/e2e-framework's builder (features.New(...).Assess(...).Feature()), run on every
// pool against its tenant cluster by the harness's adapter (suites/suiterun/e2eframework): each worker
// Node of the pool is Ready and is the one Node its kubernetes.io/hostname label selects, the
// selector a workload pins itself to a Node with (a nodeSelector on kubernetes.io/hostname).
// docs/writing-a-suite.md walks through it.
package hostnames

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/cozystack/cozy-e2e/suites/suiterun/e2eframework"
)

// Phase is the lane phase the feature runs in, once per pool (suite.yaml: perPool).
const Phase = "hostnames"

// The feature's assessments, each a stage of the pool when it passes.
const (
	AssessReady           = "ready"
	AssessFoundByHostname = "found-by-hostname"
)

type workersKey struct{}

// Feature is the feature: its setup reads the pool's worker Nodes from its tenant cluster, its
// assessments judge them.
func Feature() types.Feature {
	return features.New("workers are found by their hostname label").
		WithLabel("suite", "hostnames").
		WithSetup("workers", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_, rec, ok := e2eframework.Pool(ctx)
			if !ok {
				t.Fatal("not run by the harness: no pool in the context")
			}
			var nodes []corev1.Node
			for _, m := range rec.Machines {
				var n corev1.Node
				if err := cfg.Client().Resources().Get(ctx, m.Machine.Status.NodeRef.Name, "", &n); err != nil {
					e2eframework.Fail(ctx, t, fmt.Errorf("reading worker Node %s: %w", m.Machine.Status.NodeRef.Name, err))
				}
				nodes = append(nodes, n)
			}
			return context.WithValue(ctx, workersKey{}, nodes)
		}).
		Assess(AssessReady, func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, n := range ctx.Value(workersKey{}).([]corev1.Node) {
				if !Ready(&n) {
					t.Errorf("Node %s is not Ready", n.Name)
				}
			}
			return ctx
		}).
		Assess(AssessFoundByHostname, func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			var wrong []string
			for _, n := range ctx.Value(workersKey{}).([]corev1.Node) {
				var found corev1.NodeList
				sel := corev1.LabelHostname + "=" + Hostname(&n)
				if err := cfg.Client().Resources().List(ctx, &found, resources.WithLabelSelector(sel)); err != nil {
					e2eframework.Fail(ctx, t, fmt.Errorf("listing Nodes by %s: %w", sel, err))
				}
				if w := Selected(&n, found.Items); w != "" {
					wrong = append(wrong, w)
				}
			}
			if len(wrong) > 0 {
				e2eframework.Fail(ctx, t, fmt.Errorf("%s", strings.Join(wrong, "; ")))
			}
			return ctx
		}).
		Feature()
}

// Hostname is the host name a Node reports of itself (its Hostname address), else its name:
// the kubelet labels its Node kubernetes.io/hostname with it (k8s.io/kubernetes v1.35.4
// pkg/kubelet/kubelet_node_status.go:301-308).
func Hostname(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeHostName && a.Address != "" {
			return a.Address
		}
	}
	return n.Name
}

// Ready says whether a Node's Ready condition is True.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Selected says what is wrong when the Nodes a selector on n's hostname found are not n
// alone; "" when they are.
func Selected(n *corev1.Node, found []corev1.Node) string {
	sel := corev1.LabelHostname + "=" + Hostname(n)
	switch {
	case len(found) == 0:
		return fmt.Sprintf("no Node has %s: Node %s is not found by its hostname (its labels: %v)", sel, n.Name, n.Labels)
	case len(found) > 1 || found[0].Name != n.Name:
		var names []string
		for _, f := range found {
			names = append(names, f.Name)
		}
		return fmt.Sprintf("%s selects %s, not Node %s alone", sel, strings.Join(names, ", "), n.Name)
	}
	return ""
}
