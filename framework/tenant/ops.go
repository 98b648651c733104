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

// WaitControlPlane waits, inside ctx, until the tenant control plane of names answers and
// returns a Cluster for it, built from the admin kubeconfig Secret. A refusal of the app
// (HelmRelease Ready=False with a failure) ends the wait at once with the platform's message.
func (p Platform) WaitControlPlane(ctx context.Context, names Names) (*cluster.Cluster, error) {
	hr := Ref{GVK: HelmReleaseGVK, Namespace: names.Namespace, Name: names.HelmRelease()}
	tcp := Ref{GVK: TenantControlPlaneGVK, Namespace: names.Namespace, Name: names.ControlPlane()}
	sk := names.AdminKubeconfig()
	sec := Ref{GVK: secretGVK, Namespace: sk.Namespace, Name: sk.Name}
	err := Wait(ctx, p.Mgmt, WaitOptions{What: "tenant control plane " + names.Release(),
		Watch: []Ref{hr, tcp, sec}, Log: p.log(),
		Judge: func(objs Objects) (bool, string, error) {
			if t := refused(objs.Get(hr), "HelmRelease "+hr.Name); t != nil {
				return false, "", t
			}
			if s := objs.Get(sec); s != nil {
				if data, _, _ := unstructured.NestedString(s.Object, "data", sk.Key); data != "" {
					return true, "admin kubeconfig written", nil
				}
				return false, "Secret " + sk.Name + " has no key " + sk.Key + " yet", nil
			}
			return false, fmt.Sprintf("Secret %s not written yet; HelmRelease %s; TenantControlPlane %s", sk.Name,
				condDetail(objs.Get(hr)), tcpDetail(objs.Get(tcp))), nil
		}})
	if err != nil {
		return nil, err
	}
	tc, err := p.Mgmt.FromSecret(ctx, "tenant "+names.Release(), sk.Namespace, sk.Name, sk.Key)
	if err != nil {
		return nil, err
	}
	if _, err := tc.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, &WaitError{Phase: phaseOf(ctx), What: "tenant control plane " + names.Release(), Class: verdict.Deadline,
			Detail: fmt.Sprintf("the kubeconfig in %s is written but the apiserver does not answer /readyz: %v", sk, err)}
	}
	return tc, nil
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
// spec) and the platform renders the change once. It returns the app's new generation.
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
	return app.GetGeneration(), nil
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

// Rendering is what the platform made of generation Generation of an app.
type Rendering struct {
	// Ready is the app's Ready condition at that generation; Message its message.
	Ready   bool
	Message string
	// HelmRelease is the HelmRelease's Ready message (the chart's words).
	HelmRelease string
}

// WaitRendered waits, inside ctx (phase is the lane phase), until the platform has processed
// generation gen of the app (its status.observedGeneration) and the app and its HelmRelease
// report the same outcome, accepted (Ready=True) or refused (Ready=False with the chart's
// message). A HelmRelease the app does not mirror is waited out, never taken.
func (p Platform) WaitRendered(ctx context.Context, phase string, names Names, gen int64) (Rendering, error) {
	appRef := Ref{GVK: KubernetesGVK, Namespace: names.Namespace, Name: names.Name}
	hr := Ref{GVK: HelmReleaseGVK, Namespace: names.Namespace, Name: names.HelmRelease()}
	var out Rendering
	err := Wait(ctx, p.Mgmt, WaitOptions{Phase: phase, What: fmt.Sprintf("the platform's answer to generation %d of Kubernetes %s", gen, names),
		Watch: []Ref{appRef, hr}, Log: p.log(),
		Judge: func(objs Objects) (bool, string, error) {
			app, rel := objs.Get(appRef), objs.Get(hr)
			if app == nil || rel == nil {
				return false, fmt.Sprintf("app present %v, HelmRelease present %v", app != nil, rel != nil), nil
			}
			observed, _, _ := unstructured.NestedInt64(app.Object, "status", "observedGeneration")
			if observed < gen {
				return false, fmt.Sprintf("app status.observedGeneration %d < %d (the platform has not processed it; HelmRelease %s)",
					observed, gen, condDetail(rel)), nil
			}
			as, _, am := condition(app, "Ready")
			hs, _, hm := condition(rel, "Ready")
			// The app mirrors the HelmRelease: until both say the same, one of them (as this
			// watch sees them) is from an earlier render.
			if as == "" || as == "Unknown" || hs == "" || hs == "Unknown" || as != hs || am != hm {
				return false, fmt.Sprintf("app Ready=%s %q, HelmRelease Ready=%s %q", orDash(as), am, orDash(hs), hm), nil
			}
			out = Rendering{Ready: as == "True", Message: am, HelmRelease: hm}
			return true, "app and HelmRelease Ready=" + as, nil
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
	status, reason, msg := condition(obj, "Ready")
	if status != "False" || !failureReason(reason) {
		return nil
	}
	return &Terminal{Class: verdict.ProductAssertion, Detail: fmt.Sprintf("%s refused: %s: %s", what, reason, msg)}
}

// failureReason: the reasons Flux and the platform give a release that failed for good, as
// opposed to one still progressing.
func failureReason(reason string) bool {
	switch reason {
	case "Progressing", "ProgressingWithRetry", "DependencyNotReady", "ArtifactNotReady", "Reconciling", "":
		return false
	}
	return true
}

// condition is the status, reason and message of condition t of obj ("" when absent).
func condition(obj *unstructured.Unstructured, t string) (status, reason, message string) {
	if obj == nil {
		return "", "", ""
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m == nil || m["type"] != t {
			continue
		}
		s, _ := m["status"].(string)
		r, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		return s, r, msg
	}
	return "", "", ""
}

func condDetail(obj *unstructured.Unstructured) string {
	if obj == nil {
		return "not created yet"
	}
	s, r, m := condition(obj, "Ready")
	if s == "" {
		return "no Ready condition yet"
	}
	return strings.TrimSpace(fmt.Sprintf("Ready=%s %s %s", s, r, m))
}

func tcpDetail(obj *unstructured.Unstructured) string {
	if obj == nil {
		return "not created yet"
	}
	v, _, _ := unstructured.NestedString(obj.Object, "status", "kubernetesResources", "version", "status")
	return "version status " + orDash(v)
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
