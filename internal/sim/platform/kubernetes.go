package platform

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// reconcileKubernetes renders a Kubernetes app's release as Flux and the chart do: a refusal
// leaves every live object as it was and turns the HelmRelease Ready=False with the chart's
// message; a render is applied and the HelmRelease goes Ready with a new history entry.
func (p *Platform) reconcileKubernetes(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(HelmReleaseGVK)
	if err := p.c.Get(ctx, req.NamespacedName, hr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if hr.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	app := App{Namespace: hr.GetNamespace(), Name: hr.GetLabels()[AppNameLabel]}
	app.Spec, _, _ = unstructured.NestedMap(hr.Object, "spec", "values")
	live, err := p.live(ctx, app)
	if err != nil {
		return reconcile.Result{}, err
	}
	rendered, err := Render(app, p.class(ctx), live, p.o)
	var refusal *Refusal
	if errors.As(err, &refusal) {
		return reconcile.Result{}, p.refuse(ctx, hr, refusal)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	// The chart's objects are applied once per generation, as Helm installs or upgrades a
	// release (inSync): rewriting them on every pass of this loop, while the reconcile Jobs wait
	// for the control plane, would give Cluster API a MachineDeployment event each time, and its
	// controller counts each failed pass against a bootstrap template that is not there yet
	// ("cannot create a MachineSet when templates do not exist", sigs.k8s.io/cluster-api v1.13.6
	// internal/controllers/machinedeployment/machinedeployment_rollout_planner.go:146-147; its
	// watches name no template, machinedeployment_controller.go:104-119), backing the pool off
	// for minutes.
	if !inSync(hr) {
		for _, o := range rendered.Objects {
			if err := p.apply(ctx, o, hr); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	// The chart's Talos secrets and the Talos CA cert-manager issues from its Certificate.
	secrets, err := p.ensureTalosSecrets(ctx, app, hr)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := p.ensureTalosCA(ctx, app); err != nil {
		return reconcile.Result{}, err
	}
	for _, o := range rendered.Bootstrap {
		if err := p.apply(ctx, o, nil); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := p.released(ctx, hr, "kubernetes", rendered.Version); err != nil {
		return reconcile.Result{}, err
	}
	// The post-install hook: the bootstrap token into the tenant, once it answers.
	tokenIn := false
	if live.ControlPlaneUp {
		if tokenIn, err = p.bootstrapTokenTenant(ctx, app, secrets); err != nil {
			return reconcile.Result{}, err
		}
	}
	if !live.ControlPlaneUp || live.Talos == nil || !tokenIn {
		// The reconcile Jobs poll for their inputs (every 5 s; the sim polls faster) and the
		// hook Job restarts until the tenant answers; the KamajiControlPlane watch usually fires
		// first.
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return reconcile.Result{}, nil
}

// class resolves an operator NodeGroupClass with a live read (Helm lookup).
func (p *Platform) class(ctx context.Context) func(string) (Class, bool) {
	return func(name string) (Class, bool) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(NodeGroupClassGVK)
		if err := p.r.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return Class{}, false
		}
		c := Class{Name: name}
		c.OS, _, _ = unstructured.NestedString(u.Object, "spec", "os")
		c.Image, _, _ = unstructured.NestedString(u.Object, "spec", "image")
		c.KubernetesVersion, _, _ = unstructured.NestedString(u.Object, "spec", "kubernetesVersion")
		return c, true
	}
}

// live reads the bootstrap template kind of each pool's live MachineDeployment and whether the
// control plane is initialized.
func (p *Platform) live(ctx context.Context, app App) (Live, error) {
	l := Live{BootstrapKind: map[string]string{}}
	groups, _, _ := unstructured.NestedMap(app.Spec, "nodeGroups")
	for pool := range groups {
		md := &unstructured.Unstructured{}
		md.SetGroupVersionKind(MachineDeploymentGVK)
		err := p.r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: Release(app.Name) + "-" + pool}, md)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return l, err
		}
		l.BootstrapKind[pool], _, _ = unstructured.NestedString(md.Object, "spec", "template", "spec", "bootstrap", "configRef", "kind")
	}
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(KamajiControlPlaneGVK)
	if err := p.r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: Release(app.Name)}, kcp); err == nil {
		l.ControlPlaneUp, _, _ = unstructured.NestedBool(kcp.Object, "status", "initialized")
	} else if !apierrors.IsNotFound(err) {
		return l, err
	}
	var sec corev1.Secret
	if err := p.r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: TalosSecretsName(Release(app.Name))}, &sec); err != nil {
		return l, client.IgnoreNotFound(err)
	}
	secrets, err := p.ensureTalosSecrets(ctx, app, nil) // reads the existing one
	if err != nil {
		return l, err
	}
	l.Talos, err = p.talosInputs(ctx, app, secrets)
	return l, err
}

// apply creates o or patches the fields the chart owns, leaving what controllers own (the
// MachineDeployment's replicas, every status) alone. A non-nil owner (the HelmRelease) becomes a
// plain (not controller) owner reference: deleting the release removes what it rendered, as
// Flux's uninstall does. The bootstrap templates are owned by the control plane, as
// the reconcile Job sets them.
func (p *Platform) apply(ctx context.Context, want *unstructured.Unstructured, owner *unstructured.Unstructured) error {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(want.GroupVersionKind())
	err := p.r.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		if want.GetKind() == TalosConfigTemplateGVK.Kind || want.GetKind() == KairosConfigTemplateGVK.Kind {
			if err := p.ownByControlPlane(ctx, want); err != nil {
				return err
			}
		}
		if owner != nil {
			if err := controllerutil.SetOwnerReference(owner, want, p.c.Scheme()); err != nil {
				return fmt.Errorf("platform: %s %s/%s owned by %s: %w", want.GetKind(), want.GetNamespace(), want.GetName(), owner.GetName(), err)
			}
		}
		if err := p.c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("platform: creating %s %s/%s: %w", want.GetKind(), want.GetNamespace(), want.GetName(), err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.SetLabels(merge(cur.GetLabels(), want.GetLabels()))
	cur.SetAnnotations(merge(cur.GetAnnotations(), want.GetAnnotations()))
	spec, _ := want.Object["spec"].(map[string]any)
	curSpec, _ := cur.Object["spec"].(map[string]any)
	if curSpec == nil {
		curSpec = map[string]any{}
	}
	for k, v := range spec {
		curSpec[k] = v
	}
	cur.Object["spec"] = curSpec
	if err := p.c.Patch(ctx, cur, patch); err != nil {
		return fmt.Errorf("platform: updating %s %s/%s: %w", want.GetKind(), want.GetNamespace(), want.GetName(), err)
	}
	return nil
}

func (p *Platform) ownByControlPlane(ctx context.Context, o *unstructured.Unstructured) error {
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(KamajiControlPlaneGVK)
	name := o.GetLabels()["cluster.x-k8s.io/cluster-name"]
	if err := p.r.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: name}, kcp); err != nil {
		return fmt.Errorf("platform: %s %s: its control plane %s: %w", o.GetKind(), o.GetName(), name, err)
	}
	return controllerutil.SetOwnerReference(kcp, o, p.c.Scheme())
}
