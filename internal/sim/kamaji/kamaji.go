package kamaji

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// Options configure the Kamaji stand-in.
type Options struct {
	Tools controlplane.Tools
	// EtcdURL is the management etcd the tenant apiservers share (each under its own prefix).
	EtcdURL string
	// Dir holds each tenant control plane's certificates, kubeconfigs and logs.
	Dir string
	// Canary is the value of the canary Secret planted in every tenant cluster.
	Canary string
	Log    io.Writer
	// AdvertiseAddress, when set, is this host's address, where the real Node's pods reach what
	// listens on it: each tenant apiserver listens there too, and its Service's endpoint is
	// there, as Kamaji's Deployment's pods are its Service's endpoints.
	AdvertiseAddress string
}

// Kamaji reconciles KamajiControlPlanes into running tenant control planes.
type Kamaji struct {
	opts   Options
	client client.Client

	mu      sync.Mutex
	tenants map[string]*tenantCP
	// stopping are the control planes of deleted KamajiControlPlanes, still shutting down.
	stopping map[*tenantCP]bool
}

// Add registers the stand-in on mgr. Stop ends every tenant control plane it started.
func Add(mgr ctrl.Manager, o Options) (*Kamaji, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	k := &Kamaji{opts: o, client: mgr.GetClient(), tenants: map[string]*tenantCP{}, stopping: map[*tenantCP]bool{}}
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(KamajiControlPlaneGVK)
	tcp := &unstructured.Unstructured{}
	tcp.SetGroupVersionKind(TenantControlPlaneGVK)
	err := ctrl.NewControllerManagedBy(mgr).Named("sim-kamaji").For(kcp).Owns(tcp).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).Complete(k)
	if err != nil {
		return nil, fmt.Errorf("kamaji stand-in: %w", err)
	}
	return k, nil
}

// Stop stops every tenant control plane, those of deleted KamajiControlPlanes still shutting
// down included, at once: the world goes with them, so nothing waits for a graceful exit.
// Idempotent.
func (k *Kamaji) Stop() {
	k.mu.Lock()
	var all []*tenantCP
	for _, t := range k.tenants {
		all = append(all, t)
	}
	for t := range k.stopping {
		all = append(all, t)
	}
	k.tenants = map[string]*tenantCP{}
	k.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range all {
		wg.Add(1)
		go func(t *tenantCP) { defer wg.Done(); t.stop(stopGrace) }(t)
	}
	wg.Wait()
}

// Pids lists the processes of every running tenant control plane.
func (k *Kamaji) Pids() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []int
	for _, t := range k.tenants {
		out = append(out, t.pids()...)
	}
	for t := range k.stopping {
		out = append(out, t.pids()...)
	}
	return out
}

// Tenant is how a person reaches one tenant control plane.
type Tenant struct {
	Name       string // namespace/name of the TenantControlPlane
	URL        string
	Kubeconfig string // admin kubeconfig file (credentials: never an artifact)
}

// Tenants lists the running tenant control planes, sorted by name.
func (k *Kamaji) Tenants() []Tenant {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Tenant
	for _, t := range k.tenants {
		out = append(out, Tenant{Name: t.name, URL: t.api.URL, Kubeconfig: t.api.AdminKubeconfig})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Reconcile brings one KamajiControlPlane to a running tenant control plane.
func (k *Kamaji) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(KamajiControlPlaneGVK)
	if err := k.client.Get(ctx, req.NamespacedName, kcp); err != nil {
		if apierrors.IsNotFound(err) {
			k.forget(req.String())
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if kcp.GetDeletionTimestamp() != nil {
		k.forget(req.String())
		return ctrl.Result{}, nil
	}
	version, _, _ := unstructured.NestedString(kcp.Object, "spec", "version")
	dnsIPs, _, _ := unstructured.NestedStringSlice(kcp.Object, "spec", "network", "dnsServiceIPs")
	serviceCIDR := k.serviceCIDR(ctx, req.Namespace, req.Name)
	if len(dnsIPs) == 0 {
		// Kamaji's defaulting webhook fills an empty dnsServiceIPs with the Service CIDR's
		// base+10 (clastix/kamaji internal/webhook/handlers/tcp_defaults.go:31-43).
		if ip, err := DNSServiceIP(serviceCIDR); err == nil {
			dnsIPs = []string{ip}
		}
	}

	tcp, err := k.ensureTCP(ctx, kcp, version, serviceCIDR, dnsIPs)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Kamaji writes the admin kubeconfig Secret before the control-plane Deployment runs
	// (clastix/kamaji controllers/resources.go:65 before :69): the Secret is written as soon as
	// the tenant apiserver's address and credentials exist, and the TenantControlPlane says
	// Provisioning until it answers.
	t, err := k.ensureRunning(ctx, req.Namespace, req.Name, serviceCIDR, func(api *controlplane.APIServer, dir string) error {
		if err := k.ensureEndpoint(ctx, tcp, api); err != nil {
			return err
		}
		return k.ensureSecrets(ctx, kcp, tcp, api, dir)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := k.ensureTenantObjects(ctx, t, serviceCIDR, dnsIPs); err != nil {
		return ctrl.Result{}, fmt.Errorf("tenant %s: %w", t.name, err)
	}
	if err := k.ensureEndpoint(ctx, tcp, t.api); err != nil {
		return ctrl.Result{}, err
	}
	if err := k.ensureSecrets(ctx, kcp, tcp, t.api, t.dir); err != nil {
		return ctrl.Result{}, err
	}
	if err := k.publishStatus(ctx, kcp, tcp, t, version); err != nil {
		return ctrl.Result{}, err
	}
	if !t.published {
		t.published = true
		fmt.Fprintf(k.opts.Log, "sim: KamajiControlPlane %s initialized and ready at %s\n", req, version)
	}
	return ctrl.Result{}, nil
}

func (k *Kamaji) forget(key string) {
	k.mu.Lock()
	t := k.tenants[key]
	delete(k.tenants, key)
	k.mu.Unlock()
	if t == nil {
		return
	}
	// The control plane's Deployment belongs to its TenantControlPlane (clastix/kamaji
	// 26.8.2-edge internal/resources/k8s_deployment_resource.go:73): its pods go with the
	// garbage collector, on their own time, and no reconcile waits for them. Nor does this one,
	// or a deleted tenant's graceful exit would hold the controller, and the manager's shutdown.
	k.mu.Lock()
	k.stopping[t] = true
	k.mu.Unlock()
	go func() {
		t.stop(deleteGrace)
		k.mu.Lock()
		delete(k.stopping, t)
		k.mu.Unlock()
	}()
}

func (k *Kamaji) ensureRunning(ctx context.Context, namespace, name, serviceCIDR string, started func(*controlplane.APIServer, string) error) (*tenantCP, error) {
	key := namespace + "/" + name
	k.mu.Lock()
	t := k.tenants[key]
	k.mu.Unlock()
	if t != nil {
		return t, nil
	}
	t, err := k.startTenant(ctx, namespace, name, serviceCIDR, started)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.tenants[key] = t
	k.mu.Unlock()
	return t, nil
}

// serviceCIDR is the Service range the Cluster declares, as the Kamaji provider reads it.
func (k *Kamaji) serviceCIDR(ctx context.Context, namespace, name string) string {
	var c clusterv1.Cluster
	if err := k.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &c); err == nil {
		if blocks := c.Spec.ClusterNetwork.Services.CIDRBlocks; len(blocks) > 0 {
			return blocks[0]
		}
	}
	return DefaultServiceCIDR
}

// ensureTCP creates the TenantControlPlane and copies the dnsServiceIPs onto it on every
// reconcile, as the provider does (an empty list clears what Kamaji would default).
func (k *Kamaji) ensureTCP(ctx context.Context, kcp *unstructured.Unstructured, version, serviceCIDR string, dnsIPs []string) (*unstructured.Unstructured, error) {
	tcp := &unstructured.Unstructured{}
	tcp.SetGroupVersionKind(TenantControlPlaneGVK)
	tcp.SetNamespace(kcp.GetNamespace())
	tcp.SetName(kcp.GetName())
	// CreateOrPatch takes an unstructured object's status out of the object itself
	// (sigs.k8s.io/controller-runtime v0.23.3 pkg/controller/controllerutil/controllerutil.go:430-444
	// removes it from what ToUnstructured returns, which for an Unstructured is its own map:
	// k8s.io/apimachinery v0.35.4 pkg/runtime/converter.go:584-585). Keep the status the Get read:
	// without it every reconcile found none, wrote Provisioning over Ready, and was woken by its
	// own write, a loop of tens of writes a second for as long as the world ran.
	var read map[string]any
	_, err := controllerutil.CreateOrPatch(ctx, k.client, tcp, func() error {
		read, _, _ = unstructured.NestedMap(tcp.Object, "status")
		tcp.SetLabels(merge(tcp.GetLabels(), map[string]string{"kamaji.clastix.io/name": kcp.GetName(), clusterv1.ClusterNameLabel: kcp.GetName()}))
		ips := make([]any, 0, len(dnsIPs))
		for _, ip := range dnsIPs {
			ips = append(ips, ip)
		}
		_ = unstructured.SetNestedField(tcp.Object, version, "spec", "kubernetes", "version")
		_ = unstructured.SetNestedField(tcp.Object, serviceCIDR, "spec", "networkProfile", "serviceCidr")
		_ = unstructured.SetNestedSlice(tcp.Object, ips, "spec", "networkProfile", "dnsServiceIPs")
		_ = unstructured.SetNestedField(tcp.Object, kcp.GetName(), "spec", "dataStore")
		return controllerutil.SetControllerReference(kcp, tcp, k.client.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("TenantControlPlane %s/%s: %w", kcp.GetNamespace(), kcp.GetName(), err)
	}
	if _, ok := tcp.Object["status"]; !ok && read != nil {
		tcp.Object["status"] = read
	}
	if v, _, _ := unstructured.NestedString(tcp.Object, "status", "kubernetesResources", "version", "status"); v == "" {
		// Kamaji's version status while the control-plane Deployment is not ready
		// (api/v1alpha1/tenantcontrolplane_status.go:202-210).
		patch := client.MergeFrom(tcp.DeepCopy())
		_ = unstructured.SetNestedField(tcp.Object, "Provisioning", "status", "kubernetesResources", "version", "status")
		if err := k.client.Status().Patch(ctx, tcp, patch); err != nil {
			return nil, fmt.Errorf("TenantControlPlane %s/%s status: %w", kcp.GetNamespace(), kcp.GetName(), err)
		}
	}
	return tcp, nil
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func now() metav1.Time { return metav1.Now() }
