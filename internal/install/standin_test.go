package install

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

var gvrPackageSource = schema.GroupVersionResource{Group: "cozystack.io", Version: "v1alpha1", Resource: "packagesources"}

// standInOperator does what Cozystack's package reconciler does with dependencies
// (internal/operator/package_reconciler.go at main 3c780acd417f and v1.6.2), and nothing else:
// for each Package it records in status.dependencies whether each dependsOn Package of its
// variant exists and is Ready (l.595-666); while one is not, the Package is Ready=False,
// reason DependenciesNotReady, "One or more dependencies are not ready", and gets no
// HelmRelease (l.187-202); once all are, it creates a HelmRelease per component with an
// install section and turns Ready=True "reconciliation succeeded, generated N helmrelease(s)"
// (l.357-364). Flux's part is played too: each HelmRelease it creates reports Ready with one
// deployed release in its history.
type standInOperator struct {
	e      *env
	stop   context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	passes int
}

func (e *env) startOperator() *standInOperator {
	ctx, cancel := context.WithCancel(context.Background())
	op := &standInOperator{e: e, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(op.done)
		for ctx.Err() == nil {
			op.pass(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	e.t.Cleanup(func() { cancel(); <-op.done })
	return op
}

func (op *standInOperator) pass(ctx context.Context) {
	dyn := op.e.dyn
	sources, err := dyn.Resource(gvrPackageSource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	pkgs, err := dyn.Resource(gvrPackage).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	ready := map[string]bool{}
	for _, p := range pkgs.Items {
		s, _, _, _ := condition(&p, "Ready")
		ready[p.GetName()] = s == "True"
	}
	bySource := map[string]*unstructured.Unstructured{}
	for i := range sources.Items {
		bySource[sources.Items[i].GetName()] = &sources.Items[i]
	}
	for i := range pkgs.Items {
		p := &pkgs.Items[i]
		src := bySource[p.GetName()]
		if src == nil {
			continue
		}
		variant, _, _ := unstructured.NestedString(p.Object, "spec", "variant")
		var v map[string]any
		vs, _, _ := unstructured.NestedSlice(src.Object, "spec", "variants")
		for _, x := range vs {
			if m := x.(map[string]any); m["name"] == variant {
				v = m
			}
		}
		deps := map[string]any{}
		all := true
		dependsOn, _, _ := unstructured.NestedStringSlice(v, "dependsOn")
		for _, d := range dependsOn {
			deps[d] = map[string]any{"ready": ready[d]}
			all = all && ready[d]
		}
		cond := map[string]any{"type": "Ready", "status": "False", "reason": assumptions.DependenciesNotReady,
			"message": "One or more dependencies are not ready", "lastTransitionTime": "2026-01-01T00:00:00Z"}
		if all {
			n := 0
			comps, _, _ := unstructured.NestedSlice(v, "components")
			for _, c := range comps {
				cm := c.(map[string]any)
				install, _ := cm["install"].(map[string]any)
				if install == nil {
					continue
				}
				op.helmRelease(ctx, install["namespace"].(string), install["releaseName"].(string))
				n++
			}
			cond = map[string]any{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
				"message": fmt.Sprintf("reconciliation succeeded, generated %d helmrelease(s)", n), "lastTransitionTime": "2026-01-01T00:00:00Z"}
		}
		p.Object["status"] = map[string]any{"conditions": []any{cond}, "dependencies": deps}
		_, _ = dyn.Resource(gvrPackage).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	}
	op.mu.Lock()
	op.passes++
	op.mu.Unlock()
}

func (op *standInOperator) helmRelease(ctx context.Context, ns, name string) {
	dyn := op.e.dyn
	if _, err := dyn.Resource(gvrHelmRelease).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		return
	}
	_, _ = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, obj("v1", "Namespace", "", ns), metav1.CreateOptions{})
	hr := obj("helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, name)
	hr.Object["spec"] = map[string]any{"chart": map[string]any{"spec": map[string]any{"chart": name}}}
	hr, err := dyn.Resource(gvrHelmRelease).Namespace(ns).Create(ctx, hr, metav1.CreateOptions{})
	if err != nil {
		return
	}
	hr.Object["status"] = hrStatus("True", "InstallSucceeded", "Helm install succeeded", "deployed")
	_, _ = dyn.Resource(gvrHelmRelease).Namespace(ns).UpdateStatus(ctx, hr, metav1.UpdateOptions{})
}

// platformChart does what the platform chart does with the graph at one revision: one
// PackageSource per Package (its variant's dependsOn and one installable component), and one
// Package per Package not in disabled (templates/_helpers.tpl:9-10 emits nothing for a
// disabled name).
func (e *env) platformChart(g *assumptions.Graph, disabled []string) {
	e.t.Helper()
	off := map[string]bool{}
	for _, d := range disabled {
		off[d] = true
	}
	ctx := testkit.Context(e.t, time.Minute)
	for _, p := range g.Packages {
		short := strings.TrimPrefix(p.Name, "cozystack.")
		var deps []any
		for _, d := range p.DependsOn {
			deps = append(deps, d.Name)
		}
		src := obj("cozystack.io/v1alpha1", "PackageSource", "", p.Name)
		src.Object["spec"] = map[string]any{"variants": []any{map[string]any{
			"name": p.Variant, "dependsOn": deps,
			"components": []any{map[string]any{"name": short, "install": map[string]any{"namespace": "cozy-" + short, "releaseName": short}}},
		}}}
		if _, err := e.dyn.Resource(gvrPackageSource).Create(ctx, src, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			e.t.Fatal(err)
		}
		if off[p.Name] {
			continue
		}
		pkg := obj("cozystack.io/v1alpha1", "Package", "", p.Name)
		pkg.Object["spec"] = map[string]any{"variant": p.Variant}
		if _, err := e.dyn.Resource(gvrPackage).Create(ctx, pkg, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			e.t.Fatal(err)
		}
	}
}

func graphAt(t *testing.T, ref string) *assumptions.Graph {
	t.Helper()
	graphs, err := assumptions.Graphs()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range graphs {
		if g.Ref == ref {
			return g
		}
	}
	t.Fatalf("no graph at %s", ref)
	return nil
}
