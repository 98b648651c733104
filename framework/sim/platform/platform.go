package platform

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Platform is the stand-in; Add registers it on a manager.
type Platform struct {
	o Options
	c client.Client
	r client.Reader // live reads (NodeGroupClasses, live MachineDeployments)
}

// Add registers the Tenant and Kubernetes app reconcilers on mgr.
func Add(mgr ctrl.Manager, o Options) (*Platform, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Health == (HealthTimers{}) {
		o.Health = ChartHealthTimers()
	}
	p := &Platform{o: o, c: mgr.GetClient(), r: mgr.GetAPIReader()}
	tenant := &unstructured.Unstructured{}
	tenant.SetGroupVersionKind(TenantGVK)
	if err := ctrl.NewControllerManagedBy(mgr).Named("sim-platform-tenant").For(tenant).
		Complete(reconcile.Func(p.reconcileTenant)); err != nil {
		return nil, fmt.Errorf("platform stand-in: %w", err)
	}
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(KubernetesGVK)
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(HelmReleaseGVK)
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(KamajiControlPlaneGVK)
	// A control plane coming up lets the reconcile Jobs apply the bootstrap templates.
	toApp := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := strings.CutPrefix(o.GetName(), ReleasePrefix)
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("sim-platform-kubernetes").For(app).Owns(hr).Watches(kcp, toApp).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).Complete(reconcile.Func(p.reconcileKubernetes)); err != nil {
		return nil, fmt.Errorf("platform stand-in: %w", err)
	}
	return p, nil
}

// InstallBuiltins creates what the platform ships before any tenant: the root tenant namespace,
// the tenant admin ClusterRole, and the built-in NodeGroupClasses talos and kairos.
func InstallBuiltins(ctx context.Context, c client.Client) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RootNamespace}},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: TenantAdminClusterRole},
			// Namespaced rights only: bound by a RoleBinding, it grants nothing cluster-scoped,
			// so a tenant can never create a NodeGroupClass.
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"apps.cozystack.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
				{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "services", "configmaps", "events", "persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io", "kubevirt.io", "cdi.kubevirt.io", "helm.toolkit.fluxcd.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"cozystack.io"}, Resources: []string{"nodegroupclasses"}, Verbs: []string{"get", "list", "watch"}},
			},
		},
	}
	for _, os := range []string{ClassTalos, ClassKairos} {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"os": os}}}
		u.SetGroupVersionKind(NodeGroupClassGVK)
		u.SetName(os)
		u.SetLabels(map[string]string{"cozystack.io/built-in": "true"})
		objs = append(objs, u)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("platform: installing %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// reconcileTenant turns Tenant <t> (in tenant-root) into namespace tenant-<t> with the admin
// group's RoleBinding and the canary Secret, and reports it Ready.
func (p *Platform) reconcileTenant(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	t := &unstructured.Unstructured{}
	t.SetGroupVersionKind(TenantGVK)
	if err := p.c.Get(ctx, req.NamespacedName, t); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ns := NamespacePrefix + t.GetName()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			"tenant.cozystack.io/" + t.GetName(): "", "apps.cozystack.io/tenant": t.GetName(),
		}}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: NamespacePrefix + t.GetName() + "-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: TenantAdminClusterRole},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: TenantAdminGroup(t.GetName())}},
		},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CanarySecret}, Data: map[string][]byte{CanaryKey: []byte(p.o.Canary)}},
	}
	for _, o := range objs {
		if err := p.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("tenant %s: %T %s: %w", t.GetName(), o, o.GetName(), err)
		}
	}
	patch := client.MergeFrom(t.DeepCopy())
	_ = unstructured.SetNestedField(t.Object, ns, "status", "namespace")
	setCondition(t, "Ready", "True", "Reconciled", "namespace "+ns+" is ready")
	return reconcile.Result{}, p.c.Status().Patch(ctx, t, patch)
}
