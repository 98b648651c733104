package tenant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Platform drives the platform API of one management cluster: the Tenant and Kubernetes
// apps, the NodeGroupClasses, and the waits on what the platform renders from them.
type Platform struct {
	Mgmt *cluster.Cluster
	// Log receives progress lines for people; nil discards them.
	Log io.Writer
}

func (p Platform) log() io.Writer {
	if p.Log == nil {
		return io.Discard
	}
	return p.Log
}

var namespaceGVK = corev1.SchemeGroupVersion.WithKind("Namespace")
var secretGVK = corev1.SchemeGroupVersion.WithKind("Secret")
var configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")

// CreateTenant creates the run's Tenant app and waits, inside ctx (phase "tenant"), for the
// namespace the platform makes of it.
func (p Platform) CreateTenant(ctx context.Context, r Run) error {
	app := TenantApp(r)
	if err := p.Mgmt.Client.Create(ctx, app); err != nil {
		return fmt.Errorf("tenant: creating Tenant %s/%s: %w", app.GetNamespace(), app.GetName(), err)
	}
	appRef := Ref{GVK: TenantGVK, Namespace: RootNamespace, Name: r.TenantName()}
	nsRef := Ref{GVK: namespaceGVK, Name: r.Namespace()}
	return Wait(ctx, p.Mgmt, WaitOptions{What: "namespace " + r.Namespace() + " of Tenant " + r.TenantName(),
		Watch: []Ref{appRef, nsRef}, Log: p.log(),
		Judge: func(objs Objects) (bool, string, error) {
			if t := refused(objs.Get(appRef), "Tenant "+r.TenantName()); t != nil {
				return false, "", t
			}
			ns := objs.Get(nsRef)
			if ns == nil {
				return false, "namespace not created yet; Tenant " + condDetail(objs.Get(appRef)), nil
			}
			phase, _, _ := unstructured.NestedString(ns.Object, "status", "phase")
			return phase == string(corev1.NamespaceActive), "namespace " + orDash(phase), nil
		}})
}

// EnsureClasses creates the lane's operator NodeGroupClasses. A class that exists already
// with the same spec is used as it is (classes are cluster-scoped and immutable, so runs
// share them); one with another spec is an error naming both. It returns the classes it
// created, for teardown.
func (p Platform) EnsureClasses(ctx context.Context, l *lane.Lane) ([]string, error) {
	var created []string
	for i, c := range l.Classes {
		want := NodeGroupClass(c)
		err := p.Mgmt.Client.Create(ctx, want)
		if err == nil {
			created = append(created, c.Name)
			continue
		}
		if !apierrors.IsAlreadyExists(err) {
			return created, fmt.Errorf("%s: classes[%d] %s: creating NodeGroupClass: %w", l.File, i, c.Name, err)
		}
		have := unstructuredOf(NodeGroupClassGVK)
		if err := p.Mgmt.Client.Get(ctx, types.NamespacedName{Name: c.Name}, have); err != nil {
			return created, err
		}
		if !reflect.DeepEqual(have.Object["spec"], want.Object["spec"]) {
			return created, fmt.Errorf("%s: classes[%d]: NodeGroupClass %s exists with spec %v, not the lane's %v; classes are immutable, so name the lane's class differently",
				l.File, i, c.Name, have.Object["spec"], want.Object["spec"])
		}
	}
	return created, nil
}

// CreateCluster creates the Kubernetes app of spec.
func (p Platform) CreateCluster(ctx context.Context, spec ClusterSpec) error {
	var pools []string
	for _, pl := range spec.Pools {
		pools = append(pools, pl.Name)
	}
	if err := spec.Names.CheckPoolNames(pools...); err != nil {
		return err
	}
	app := KubernetesApp(spec)
	if err := p.Mgmt.Client.Create(ctx, app); err != nil {
		return fmt.Errorf("tenant: creating Kubernetes %s: %w", spec.Names, err)
	}
	return nil
}

// Get reads the Kubernetes app of names.
func (p Platform) Get(ctx context.Context, names Names) (*unstructured.Unstructured, error) {
	app := unstructuredOf(KubernetesGVK)
	if err := p.Mgmt.Client.Get(ctx, types.NamespacedName{Namespace: names.Namespace, Name: names.Name}, app); err != nil {
		return nil, fmt.Errorf("tenant: reading Kubernetes %s: %w", names, err)
	}
	return app, nil
}

// UpdatePool changes nodeGroups.<pool> of the app with mutate (see UpdatePools).
func (p Platform) UpdatePool(ctx context.Context, names Names, pool string, mutate func(group map[string]any)) (int64, error) {
	return p.UpdatePools(ctx, names, map[string]func(map[string]any){pool: mutate})
}

// UpdatePools changes nodeGroups.<pool> of the app with its mutate, for each pool, in one
// write: a merge patch of those entries (keys a mutate removed become null), so a status the
// platform writes meanwhile is no conflict (the harness is the only writer of the app's
// spec) and the platform renders the change once. It returns the generation of the app's
// HelmRelease that carries the change: the app itself has none (cozystack-api serves it from
// the HelmRelease and writes through to it, cozystack/cozystack pkg/registry/apps/application/
// rest.go:1340-1362, :486-636), so what the platform made of the write is read there.
func (p Platform) UpdatePools(ctx context.Context, names Names, mutates map[string]func(group map[string]any)) (int64, error) {
	app, err := p.Get(ctx, names)
	if err != nil {
		return 0, err
	}
	groups := map[string]any{}
	for pool, mutate := range mutates {
		group, ok, _ := unstructured.NestedMap(app.Object, "spec", "nodeGroups", pool)
		if !ok {
			return 0, fmt.Errorf("tenant: Kubernetes %s has no nodeGroups.%s", names, pool)
		}
		changed := runtime.DeepCopyJSON(group)
		mutate(changed)
		entry := map[string]any{}
		for k := range group {
			entry[k] = nil
		}
		for k, v := range changed {
			entry[k] = v
		}
		groups[pool] = entry
	}
	data, err := json.Marshal(map[string]any{"spec": map[string]any{"nodeGroups": groups}})
	if err != nil {
		return 0, err
	}
	if err := p.Mgmt.Client.Patch(ctx, app, client.RawPatch(types.MergePatchType, data)); err != nil {
		return 0, fmt.Errorf("tenant: updating Kubernetes %s nodeGroups: %w", names, err)
	}
	return p.ReleaseGeneration(ctx, names)
}

// ReleaseGeneration is the metadata.generation of the app's HelmRelease: what a render of the
// app's current spec is judged against.
func (p Platform) ReleaseGeneration(ctx context.Context, names Names) (int64, error) {
	hr := unstructuredOf(HelmReleaseGVK)
	if err := p.Mgmt.Client.Get(ctx, types.NamespacedName{Namespace: names.Namespace, Name: names.HelmRelease()}, hr); err != nil {
		return 0, fmt.Errorf("tenant: reading HelmRelease %s/%s of Kubernetes %s: %w", names.Namespace, names.HelmRelease(), names, err)
	}
	return hr.GetGeneration(), nil
}

// Restore is a mutate that makes a nodeGroups entry equal to orig again.
func Restore(orig map[string]any) func(map[string]any) {
	return func(g map[string]any) {
		for k := range g {
			delete(g, k)
		}
		for k, v := range runtime.DeepCopyJSON(orig) {
			g[k] = v
		}
	}
}

// Rendering is what the platform made of one generation of an app's HelmRelease.
type Rendering struct {
	// Ready is the HelmRelease's Ready condition once it attempted that generation.
	Ready bool
	// HelmRelease is the HelmRelease's Ready message (the chart's words on a refusal).
	HelmRelease string
}

// WaitRendered waits, inside ctx, until Flux has attempted generation gen of the app's
// HelmRelease (status.lastAttemptedGeneration, helm-controller's HelmReleaseStatus) and says
// how it went: accepted (Ready=True) or refused (Ready=False with the chart's message). A Ready
// condition from an earlier attempt (its observedGeneration below gen) is waited out.
func (p Platform) WaitRendered(ctx context.Context, names Names, gen int64) (Rendering, error) {
	hr := Ref{GVK: HelmReleaseGVK, Namespace: names.Namespace, Name: names.HelmRelease()}
	var out Rendering
	err := Wait(ctx, p.Mgmt, WaitOptions{What: fmt.Sprintf("the platform's answer to generation %d of HelmRelease %s/%s", gen, hr.Namespace, hr.Name),
		Watch: []Ref{hr}, Log: p.log(),
		Judge: func(objs Objects) (bool, string, error) {
			rel := objs.Get(hr)
			if rel == nil {
				return false, "HelmRelease not created yet", nil
			}
			attempted, _, _ := unstructured.NestedInt64(rel.Object, "status", "lastAttemptedGeneration")
			if attempted < gen {
				return false, fmt.Sprintf("status.lastAttemptedGeneration %d < %d (Flux has not attempted it; %s)", attempted, gen, condDetail(rel)), nil
			}
			status, reason, msg := Condition(rel, "Ready")
			if observed := conditionGeneration(rel, "Ready"); observed > 0 && observed < gen {
				return false, fmt.Sprintf("Ready is of generation %d, not yet %d", observed, gen), nil
			}
			// Ready=False for a reason helm-controller gives while it still works on the release
			// (a health check cancelled by a new reconcile, say) is no answer yet.
			if status != "True" && (status != "False" || !failureReason(reason)) {
				return false, condDetail(rel), nil
			}
			// Flux patches a release's conditions first and the rest of its status (history,
			// observedGeneration) in a second request (github.com/fluxcd/pkg/runtime v0.110.1
			// patch/patch.go:224-235, which helm-controller v1.6.2 uses,
			// internal/controller/helmrelease_controller.go:143-164): a release is answered once
			// both are written.
			if observed, _, _ := unstructured.NestedInt64(rel.Object, "status", "observedGeneration"); status == "True" && observed < gen {
				return false, fmt.Sprintf("Ready=True; status.observedGeneration %d < %d (Flux has not written the rest of its status yet)", observed, gen), nil
			}
			out = Rendering{Ready: status == "True", HelmRelease: msg}
			return true, "HelmRelease Ready=" + status, nil
		}})
	return out, err
}

// DeleteApp deletes the Kubernetes app of names (absent is fine).
func (p Platform) DeleteApp(ctx context.Context, names Names) error {
	app := unstructuredOf(KubernetesGVK)
	app.SetNamespace(names.Namespace)
	app.SetName(names.Name)
	if err := p.Mgmt.Client.Delete(ctx, app, client.PropagationPolicy("Foreground")); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("teardown: deleting Kubernetes %s: %w", names, err)
	}
	return nil
}

// DeleteTenant deletes the run's Tenant app (absent is fine).
func (p Platform) DeleteTenant(ctx context.Context, r Run) error {
	app := TenantApp(r)
	if err := p.Mgmt.Client.Delete(ctx, app); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("teardown: deleting Tenant %s/%s: %w", app.GetNamespace(), app.GetName(), err)
	}
	return nil
}

// DeleteClasses deletes the NodeGroupClasses the run created.
func (p Platform) DeleteClasses(ctx context.Context, names []string) error {
	for _, n := range names {
		u := unstructuredOf(NodeGroupClassGVK)
		u.SetName(n)
		if err := p.Mgmt.Client.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("teardown: deleting NodeGroupClass %s: %w", n, err)
		}
	}
	return nil
}

// refused is a Terminal when obj's Ready condition is False with a failure reason: the
// platform (or the chart it renders) refused it.
func refused(obj *unstructured.Unstructured, what string) *Terminal {
	status, reason, msg := Condition(obj, "Ready")
	if status != "False" || !failureReason(reason) {
		return nil
	}
	return &Terminal{Class: verdict.ProductAssertion, Detail: fmt.Sprintf("%s refused: %s: %s", what, reason, msg)}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func unstructuredOf(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// Leftovers are the kinds teardown requires gone from a tenant namespace: a VM, VMI,
// DataVolume or PVC left behind holds memory or storage the next run needs.
var Leftovers = []schema.GroupVersionKind{
	{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"},
	{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachineInstance"},
	{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"},
	corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
}

// WaitDrained waits, inside ctx (phase teardown), until namespace holds none of Leftovers.
// What is still there at the deadline is named in a *WaitError of class teardown.
func (p Platform) WaitDrained(ctx context.Context, namespace string) error {
	var refs []Ref
	for _, gvk := range Leftovers {
		refs = append(refs, Ref{GVK: gvk, Namespace: namespace})
	}
	err := Wait(ctx, p.Mgmt, WaitOptions{What: "namespace " + namespace + " drained of VMs, VMIs, DataVolumes and PVCs",
		Watch: refs, Log: p.log(),
		Judge: func(objs Objects) (bool, string, error) {
			var left []string
			for _, r := range refs {
				for _, o := range objs[r] {
					left = append(left, r.GVK.Kind+" "+o.GetName())
				}
			}
			if len(left) == 0 {
				return true, "nothing left", nil
			}
			return false, "left: " + strings.Join(left, ", "), nil
		}})
	var we *WaitError
	if errors.As(err, &we) && we.Class == verdict.Deadline {
		we.Class = verdict.Teardown
	}
	return err
}
