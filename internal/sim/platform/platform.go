package platform

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// Platform is the stand-in; Add registers it on a manager.
type Platform struct {
	o Options
	c client.Client
	r client.Reader // live reads (NodeGroupClasses, live MachineDeployments)

	mu sync.Mutex
	// tokensDone are the releases whose bootstrap token the tenant holds, by admin kubeconfig.
	tokensDone map[string]bool
}

// Add registers the platform's reconcilers on mgr. They reconcile the HelmReleases the apps
// are served from (internal/sim/cozyapi, as cozystack-api keeps them): a Tenant's release makes
// its namespace, a Kubernetes app's release is rendered as the chart would render it.
func Add(mgr ctrl.Manager, o Options) (*Platform, error) {
	p := newPlatform(o, mgr.GetClient(), mgr.GetAPIReader())
	// A release is reconciled when its spec changes (its status is the platform's own write).
	// A Kubernetes app the real chart renders (simenv.RendererLabel) is helm-controller's.
	of := func(kind string) predicate.Predicate {
		return predicate.And(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[AppKindLabel] == kind && o.GetLabels()[simenv.RendererLabel] != simenv.RendererChart
		}), predicate.GenerationChangedPredicate{})
	}
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(HelmReleaseGVK)
	if err := ctrl.NewControllerManagedBy(mgr).Named("sim-platform-tenant").For(hr, builder.WithPredicates(of("Tenant"))).
		Complete(reconcile.Func(p.reconcileTenant)); err != nil {
		return nil, fmt.Errorf("platform stand-in: %w", err)
	}
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(KamajiControlPlaneGVK)
	// A control plane coming up lets the reconcile Jobs apply the bootstrap templates.
	toRelease := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if !strings.HasPrefix(o.GetName(), ReleasePrefix) {
			return nil
		}
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(HelmReleaseGVK)
		if err := mgr.GetClient().Get(context.Background(), client.ObjectKeyFromObject(o), hr); err != nil || hr.GetLabels()[simenv.RendererLabel] == simenv.RendererChart {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
	})
	hr2 := &unstructured.Unstructured{}
	hr2.SetGroupVersionKind(HelmReleaseGVK)
	if err := ctrl.NewControllerManagedBy(mgr).Named("sim-platform-kubernetes").For(hr2, builder.WithPredicates(of("Kubernetes"))).Watches(kcp, toRelease).
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

// newPlatform is the stand-in writing through c and reading live through r, with o's defaults
// filled in.
func newPlatform(o Options, c client.Client, r client.Reader) *Platform {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Health == (HealthTimers{}) {
		o.Health = ChartHealthTimers()
	}
	return &Platform{o: o, c: c, r: r, tokensDone: map[string]bool{}}
}

// reconcileTenant turns Tenant <t>'s release (tenant-<t> in tenant-root) into namespace
// tenant-<t> with the admin group's RoleBinding and the canary Secret, and reports the release
// Ready, as the tenant chart and Flux do.
func (p *Platform) reconcileTenant(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(HelmReleaseGVK)
	if err := p.c.Get(ctx, req.NamespacedName, hr); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, p.uninstallTenant(ctx, req.Name)
		}
		return reconcile.Result{}, err
	}
	if hr.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	name := hr.GetLabels()[AppNameLabel]
	ns := NamespacePrefix + name
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			"tenant.cozystack.io/" + name: "", "apps.cozystack.io/tenant": name,
		}}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TenantAdminBinding},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: TenantAdminClusterRole},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: TenantAdminGroup(name)}},
		},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CanarySecret}, Data: map[string][]byte{CanaryKey: []byte(p.o.Canary)}},
		// The platform's values every app's release reads (valuesFrom), as the Tenant chart writes
		// them (Cozystack v1.6.1 packages/apps/tenant/templates/namespace.yaml lines 107-129): the
		// cluster domain of packages/core/platform's values and the services of tenant-root.
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cozystack-values", Labels: map[string]string{"reconcile.fluxcd.io/watch": "Enabled"}},
			Type:       corev1.SecretTypeOpaque,
			StringData: map[string]string{"values.yaml": "_cluster:\n  cluster-domain: " + mgmtClusterDomain + "\n_namespace:\n  etcd: " + RootNamespace +
				"\n  ingress: " + RootNamespace + "\n  gateway: \"\"\n  monitoring: " + RootNamespace + "\n  seaweedfs: \"\"\n  host: example.org\n"},
		},
	}
	for _, o := range objs {
		if err := p.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("tenant %s: %T %s: %w", name, o, o.GetName(), err)
		}
	}
	return reconcile.Result{}, p.released(ctx, hr, "tenant", "")
}

// uninstallTenant is Flux uninstalling a Tenant's release tenant-<t>: the tenant chart rendered
// namespace tenant-<t> (cozystack v1.6.1 packages/apps/tenant/templates/namespace.yaml:78-105),
// so the uninstall deletes it, and the namespace controller deletes what is in it.
func (p *Platform) uninstallTenant(ctx context.Context, release string) error {
	ns := &corev1.Namespace{}
	if err := p.r.Get(ctx, client.ObjectKey{Name: release}, ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	tenant := strings.TrimPrefix(release, NamespacePrefix)
	if _, ok := ns.Labels["apps.cozystack.io/tenant"]; !ok || ns.Labels["apps.cozystack.io/tenant"] != tenant || ns.DeletionTimestamp != nil {
		return nil
	}
	return client.IgnoreNotFound(p.c.Delete(ctx, ns))
}

// ApplicationDefinitionGVK is the platform's definition of an app kind (cozystack/cozystack main
// 3c780ac api/v1alpha1/applicationdefinitions_types.go, cluster-scoped).
var ApplicationDefinitionGVK = schema.GroupVersionKind{Group: "cozystack.io", Version: "v1alpha1", Kind: "ApplicationDefinition"}

// PublishKubernetesDefinition publishes the Kubernetes app's ApplicationDefinition as the
// platform's kubernetes-rd package does (packages/system/kubernetes-rd/cozyrds/kubernetes.yaml:
// name kubernetes, application kind Kubernetes, plural kuberneteses, singular kubernetes, its
// openAPISchema the Kubernetes chart's values schema as a string; release prefix kubernetes-),
// with valuesSchema the values.schema.json of the chart the sim renders.
func PublishKubernetesDefinition(ctx context.Context, c client.Client, valuesSchema []byte) error {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"application": map[string]any{"kind": "Kubernetes", "plural": "kuberneteses", "singular": "kubernetes", "openAPISchema": string(valuesSchema)},
		"release":     map[string]any{"prefix": "kubernetes-"},
	}}}
	u.SetGroupVersionKind(ApplicationDefinitionGVK)
	u.SetName("kubernetes")
	if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("sim: the Kubernetes app's ApplicationDefinition: %w", err)
	}
	return nil
}
