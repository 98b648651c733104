package world

//lint:file-ignore SA1019 the sim registers every Cluster API version its controllers serve, v1beta1 included, as Cluster API's own manager does.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	kubeadmbootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	kubeadmbootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kubeadmcpv1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1"
	kubeadmcpv1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/api/core/v1beta2/index"
	ipamv1alpha1 "sigs.k8s.io/cluster-api/api/ipam/v1alpha1"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1alpha1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/controllers"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/contract"
	"sigs.k8s.io/cluster-api/webhooks"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// managerScheme is the harness scheme plus every Cluster API group whose CRDs the sim installs,
// so the conversion webhook can convert each of them.
func managerScheme() *runtime.Scheme {
	s := cluster.Scheme()
	for _, add := range []func(*runtime.Scheme) error{
		addonsv1beta1.AddToScheme, addonsv1.AddToScheme, ipamv1alpha1.AddToScheme, ipamv1beta1.AddToScheme, ipamv1.AddToScheme,
		runtimev1alpha1.AddToScheme, runtimev1.AddToScheme, kubeadmbootstrapv1beta1.AddToScheme, kubeadmbootstrapv1.AddToScheme,
		kubeadmcpv1beta1.AddToScheme, kubeadmcpv1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}

// managerStopGrace bounds the manager's shutdown. Its reconciles end with their context; one
// that does not is left to fail against the stopped apiserver rather than hold the world's stop
// for controller-runtime's default 30 s (manager.Options.GracefulShutdownTimeout).
const managerStopGrace = 2 * time.Second

// newManager builds the manager with Cluster API's own cache and client settings (its main.go:
// Secrets cached only when they carry a cluster name and read live otherwise, unstructured
// objects cached), the webhook server on loopback, no metrics or health ports, and the Cluster
// API controllers and webhooks registered.
func newManager(ctx context.Context, cfg *rest.Config, s *webhookServing, log logr.Logger) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 100, 200
	req, _ := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	syncPeriod := 10 * time.Minute
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: managerScheme(),
		Logger: log,
		// The controllers log through controller-runtime's logger, which the orchestrator owns.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{
			SyncPeriod: &syncPeriod,
			ByObject:   map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.NewSelector().Add(*req)}},
		},
		Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}}, Unstructured: true}},
		WebhookServer:           s.server,
		GracefulShutdownTimeout: ptr.To(managerStopGrace),
	})
	if err != nil {
		return nil, fmt.Errorf("world: controller manager: %w", err)
	}
	// Set-up code logs through the context's logger, which falls back to controller-runtime's
	// global one: give it the manager's, so nothing waits on a global logger no one set.
	if err := setupClusterAPI(ctrl.LoggerInto(ctx, log), mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}

// The workers of each Cluster API controller are Cluster API's own defaults (sigs.k8s.io/cluster-api
// v1.13.6 main.go:196-220: --cluster-concurrency 50, --clustercache-concurrency 100,
// --machine-concurrency 100, --machineset-concurrency 50, --machinedeployment-concurrency 50,
// --machinehealthcheck-concurrency 50; main.go:811-813 hands each to its controller as
// MaxConcurrentReconciles). Fewer would serialise what Cluster API does in parallel: the
// Machines of a pool would wait for each other's reconciles.
const (
	capiClusterConcurrency            = 50
	capiClusterCacheConcurrency       = 100
	capiMachineConcurrency            = 100
	capiMachineSetConcurrency         = 50
	capiMachineDeploymentConcurrency  = 50
	capiMachineHealthCheckConcurrency = 50
)

func concurrency(c int) controller.Options { return controller.Options{MaxConcurrentReconciles: c} }

// setupClusterAPI registers the real Cluster API controllers (Cluster, MachineDeployment,
// MachineSet, Machine, MachineHealthCheck, with the ClusterCache that reaches each workload
// cluster through its <cluster>-kubeconfig Secret) and their webhooks, conversion included.
func setupClusterAPI(ctx context.Context, mgr ctrl.Manager) error {
	// Converting a v1beta2 reference to v1beta1 needs the apiVersion of the referenced kind,
	// which Cluster API reads from the contract label on the provider's CRD.
	clusterv1beta1.SetAPIVersionGetter(func(gk schema.GroupKind) (string, error) {
		return contractAPIVersion(ctx, mgr.GetClient(), gk)
	})
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return fmt.Errorf("world: Cluster API indexes: %w", err)
	}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: mgr.GetAPIReader(),
		Cache: clustercache.CacheOptions{
			Indexes: []clustercache.CacheOptionsIndex{clustercache.NodeProviderIDIndex},
		},
		Client: clustercache.ClientOptions{
			// --clustercache-client-qps 20 and --clustercache-client-burst 30, Cluster API's
			// defaults (v1.13.6 main.go:242-245).
			QPS: 20, Burst: 30, UserAgent: "sim-cluster-api",
			// As Cluster API's own manager reads the workload clusters (v1.13.6
			// internal/setup/setup.go:103-122): the Machine controller pages through
			// VolumeAttachments while it waits for a deleted Machine's volumes to detach, which
			// a cached list cannot do.
			Cache: clustercache.ClientCacheOptions{DisableFor: []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Pod{},
				&appsv1.DaemonSet{}, &storagev1.VolumeAttachment{}, &corev1.PersistentVolume{}}},
		},
	}, concurrency(capiClusterCacheConcurrency))
	if err != nil {
		return fmt.Errorf("world: Cluster API ClusterCache: %w", err)
	}
	steps := []struct {
		name  string
		setup func() error
	}{
		{"Cluster", func() error {
			return (&controllers.ClusterReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc,
				RemoteConnectionGracePeriod: 50 * time.Second}).SetupWithManager(ctx, mgr, concurrency(capiClusterConcurrency))
		}},
		{"Machine", func() error {
			return (&controllers.MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc,
				RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, concurrency(capiMachineConcurrency))
		}},
		{"MachineSet", func() error {
			return (&controllers.MachineSetReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc,
				PreflightChecks: sets.New(clusterv1.MachineSetPreflightCheckAll)}).SetupWithManager(ctx, mgr, concurrency(capiMachineSetConcurrency))
		}},
		{"MachineDeployment", func() error {
			return (&controllers.MachineDeploymentReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, concurrency(capiMachineDeploymentConcurrency))
		}},
		{"MachineHealthCheck", func() error {
			return (&controllers.MachineHealthCheckReconciler{Client: mgr.GetClient(), ClusterCache: cc}).SetupWithManager(ctx, mgr, concurrency(capiMachineHealthCheckConcurrency))
		}},
		{"Cluster webhook", func() error {
			return (&webhooks.Cluster{Client: mgr.GetClient(), ClusterCacheReader: cc}).SetupWebhookWithManager(mgr)
		}},
		{"Machine webhook", func() error { return (&webhooks.Machine{}).SetupWebhookWithManager(mgr) }},
		{"MachineSet webhook", func() error { return (&webhooks.MachineSet{}).SetupWebhookWithManager(mgr) }},
		{"MachineDeployment webhook", func() error { return (&webhooks.MachineDeployment{}).SetupWebhookWithManager(mgr) }},
		{"MachineHealthCheck webhook", func() error { return (&webhooks.MachineHealthCheck{}).SetupWebhookWithManager(mgr) }},
	}
	for _, s := range steps {
		if err := s.setup(); err != nil {
			return fmt.Errorf("world: Cluster API %s: %w", s.name, err)
		}
	}
	return nil
}

// contractAPIVersion is the apiVersion of kind gk as its CRD's contract labels declare it
// (cluster.x-k8s.io/v1beta2, else cluster.x-k8s.io/v1beta1: "v1alpha1_v1alpha2"), the latest
// listed; this is how Cluster API resolves a provider's version. It reads one CRD's metadata
// through the manager's cache, as Cluster API's own manager does: every conversion of a
// reference asks, and listing whole CRDs (megabytes each) per conversion starves the apiserver.
func contractAPIVersion(ctx context.Context, r client.Reader, gk schema.GroupKind) (string, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	name := contract.CalculateCRDName(gk.Group, gk.Kind)
	if err := r.Get(ctx, client.ObjectKey{Name: name}, meta); err != nil {
		return "", fmt.Errorf("no CRD %s serves %s: %w", name, gk, err)
	}
	for _, c := range []string{"v1beta2", "v1beta1"} {
		v := meta.Labels[clusterv1.GroupVersion.Group+"/"+c]
		if v == "" {
			continue
		}
		versions := strings.Split(v, "_")
		sort.Strings(versions)
		return schema.GroupVersion{Group: gk.Group, Version: versions[len(versions)-1]}.String(), nil
	}
	return "", fmt.Errorf("CRD %s carries no Cluster API contract label (cluster.x-k8s.io/v1beta1 or v1beta2)", name)
}
