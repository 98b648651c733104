// Package bootstrap stands in for the Kairos Cluster API bootstrap provider (KairosConfig
// bootstrap.cluster.x-k8s.io/v1beta2, the v1beta2 contract: status.initialization.
// dataSecretCreated), which no module the sim can build serves: for each KairosConfig Cluster API
// clones from a pool's template it writes the bootstrap data Secret, status.dataSecretName, the
// ready fields and the provider's conditions; a KairosConfig whose spec the provider would refuse
// gets its failureReason, and its validating webhook refuses what the provider's refuses. The
// Talos pools' bootstrap data comes from the real Talos bootstrap provider (CABPT v0.6.12, run
// by the sim substrate). Parse reads either kind of data back, as a guest does.
package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// Condition types and reasons the providers report.
const (
	DataSecretAvailable             = "DataSecretAvailable"
	BootstrapReady                  = "BootstrapReady"
	WaitingForClusterInfrastructure = "WaitingForClusterInfrastructure"
	WaitingForControlPlaneInit      = "WaitingForControlPlaneInitialization"
	KairosGenerationFailed          = "BootstrapDataSecretGenerationFailed"
)

// Setup registers the KairosConfig reconciler and the provider's webhook on mgr.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	if err := setup(mgr, names.KairosConfigGVK, &kairos{base: base{c: mgr.GetClient(), env: env}}, passwordSecretConfigs(mgr.GetClient()), names.KubevirtMachineGVK); err != nil {
		return err
	}
	if env.Webhooks == nil {
		return nil
	}
	return env.Webhooks.Validating(kairosWebhook(env))
}

// setup registers r for configs of kind gvk; secrets maps a Secret to the configs it wakes (nil:
// none); also are kinds whose object of the same name (the Machine's infrastructure, say) wakes
// the config of that name.
func setup(mgr manager.Manager, gvk schema.GroupVersionKind, r reconcile.Reconciler, secrets handler.MapFunc, also ...schema.GroupVersionKind) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	b := ctrl.NewControllerManagedBy(mgr)
	if secrets != nil {
		b = b.Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(secrets))
	}
	for _, k := range also {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(k)
		b = b.Watches(o, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
		}))
	}
	return b.
		Named("sim-"+gvk.Kind).
		For(obj).
		// The Machine controller sets the owner reference and Cluster API's Cluster turns
		// infrastructure-provisioned and control-plane-initialized later: both wake the config.
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			m := o.(*clusterv1.Machine)
			if m.Spec.Bootstrap.ConfigRef.Kind != gvk.Kind {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}}}
		})).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := mgr.GetClient().List(ctx, list, client.InNamespace(o.GetNamespace()),
				client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
				return nil
			}
			out := make([]reconcile.Request, 0, len(list.Items))
			for _, it := range list.Items {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: it.GetNamespace(), Name: it.GetName()}})
			}
			return out
		})).
		Complete(r)
}

// base is what both providers do alike.
type base struct {
	c   client.Client
	env *simenv.Env
}

// scope is one config with its Machine and Cluster.
type scope struct {
	config  *unstructured.Unstructured
	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
}

// load reads the config, its owner Machine and its Cluster; a nil scope means "wait".
func (b *base) load(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (*scope, error) {
	cfg := &unstructured.Unstructured{}
	cfg.SetGroupVersionKind(gvk)
	if err := b.c.Get(ctx, key, cfg); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if cfg.GetDeletionTimestamp() != nil {
		return nil, nil
	}
	var owner string
	for _, ref := range cfg.GetOwnerReferences() {
		if ref.Kind == "Machine" && schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).Group == clusterv1.GroupVersion.Group {
			owner = ref.Name
		}
	}
	if owner == "" {
		return nil, nil // the Machine controller sets the owner reference; its watch brings us back
	}
	s := &scope{config: cfg, machine: &clusterv1.Machine{}, cluster: &clusterv1.Cluster{}}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: owner}, s.machine); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: s.machine.Spec.ClusterName}, s.cluster); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return s, nil
}

func infrastructureProvisioned(c *clusterv1.Cluster) bool {
	p := c.Status.Initialization.InfrastructureProvisioned
	return p != nil && *p
}

func controlPlaneInitialized(c *clusterv1.Cluster) bool {
	p := c.Status.Initialization.ControlPlaneInitialized
	return p != nil && *p
}

// writeSecret creates the bootstrap data Secret name (key value), labelled with the cluster and
// owned by the config, unless it exists.
func (b *base) writeSecret(ctx context.Context, s *scope, name string, typ corev1.SecretType, data []byte) error {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.config.GetNamespace(), Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: s.config.GetAPIVersion(), Kind: s.config.GetKind(), Name: s.config.GetName(), UID: s.config.GetUID(),
				Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
		},
		Type: typ,
		Data: map[string][]byte{"value": data},
	}
	if err := b.c.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s %s/%s: bootstrap data secret %s: %w", s.config.GetKind(), s.config.GetNamespace(), s.config.GetName(), name, err)
	}
	return nil
}

// rewriteSecret replaces the bootstrap data in Secret name, as a provider that renders it again.
func (b *base) rewriteSecret(ctx context.Context, s *scope, name string, data []byte) error {
	sec := &corev1.Secret{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: s.config.GetNamespace(), Name: name}, sec); err != nil {
		return client.IgnoreNotFound(err)
	}
	if string(sec.Data["value"]) == string(data) {
		return nil
	}
	sec.Data["value"] = data
	return b.c.Update(ctx, sec)
}

// updateStatus writes the config's status, with observedGeneration.
func (b *base) updateStatus(ctx context.Context, cfg *unstructured.Unstructured) error {
	_ = unstructured.SetNestedField(cfg.Object, cfg.GetGeneration(), "status", "observedGeneration")
	if err := b.c.Status().Update(ctx, cfg); err != nil {
		return fmt.Errorf("%s %s/%s: status: %w", cfg.GetKind(), cfg.GetNamespace(), cfg.GetName(), err)
	}
	return nil
}

func (b *base) now() time.Time { return b.env.Now() }

func ptr[T any](v T) *T { return &v }

func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
