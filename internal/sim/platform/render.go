package platform

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-e2e/internal/sim/kamaji"
)

// App is a Kubernetes app as the chart receives it.
type App struct {
	Namespace, Name string
	Spec            map[string]any
}

// Class is a resolved NodeGroupClass.
type Class struct {
	Name, OS, Image, KubernetesVersion string
}

// Live is what the render reads from the cluster: the bootstrap template kind each pool's live
// MachineDeployment references (the class-switch guard), and whether the control plane is up
// (the reconcile Jobs apply the bootstrap templates only then).
type Live struct {
	BootstrapKind  map[string]string
	ControlPlaneUp bool
	// Talos is what the talos-reconcile Job waits for, nil while something is missing: the
	// Talos pools' bootstrap templates are rendered only with it.
	Talos *TalosInputs
}

// Refusal is the chart failing to render: it names the pool and field, in the words the chart's
// own node-group refusals use ("nodeGroup <name>: ...", cozystack/cozystack
// packages/apps/kubernetes/templates/cluster.yaml, e.g. :560).
type Refusal struct {
	Pool, Field, Message string
}

func (r *Refusal) Error() string {
	if r.Pool == "" {
		return r.Field + ": " + r.Message
	}
	return fmt.Sprintf("nodeGroup %s: %s %s", r.Pool, r.Field, r.Message)
}

// Rendered is the chart's output.
type Rendered struct {
	// Version is the exact release of the control plane.
	Version string
	// Objects are applied on every render; Bootstrap are the bootstrap templates the reconcile
	// Jobs apply once their inputs are there (Talos: TalosInputs; Kairos: the control plane up).
	Objects, Bootstrap []*unstructured.Unstructured
}

type renderer struct {
	app      App
	release  string
	version  string
	classes  func(name string) (Class, bool)
	live     Live
	o        Options
	wrongDNS bool
	pools    []string
	poolSpec map[string]map[string]any
}

// Render renders app as packages/apps/kubernetes does, or refuses it. classes resolves an
// operator NodeGroupClass (the built-ins are resolved without it).
func Render(app App, classes func(name string) (Class, bool), live Live, o Options) (*Rendered, error) {
	r := &renderer{app: app, release: Release(app.Name), classes: classes, live: live, o: o, poolSpec: map[string]map[string]any{}}
	key, _ := app.Spec["version"].(string)
	if key == "" {
		key = "v1.35"
	}
	r.version = o.Versions[key]
	if r.version == "" {
		// The chart's own refusal (Cozystack v1.6.1 packages/apps/kubernetes/templates/
		// _versions.tpl:1-7: printf with sprig's keys of files/versions.yaml, a list).
		return nil, &Refusal{Field: "version", Message: fmt.Sprintf("Kubernetes version %s is not supported, allowed versions are [%s]", key, strings.Join(keys(o.Versions), " "))}
	}
	groups, _ := app.Spec["nodeGroups"].(map[string]any)
	if len(groups) == 0 {
		groups = map[string]any{"md0": map[string]any{"minReplicas": int64(0), "maxReplicas": int64(10), "roles": []any{"ingress-nginx"}}}
	}
	for name, g := range groups {
		spec, _ := g.(map[string]any)
		r.pools = append(r.pools, name)
		r.poolSpec[name] = spec
	}
	sort.Strings(r.pools)
	r.wrongDNS = o.Faults != nil && o.Faults.Selected("cluster-dns-mismatch")
	out := &Rendered{Version: r.version}
	out.Objects = append(out.Objects, r.cluster(), r.controlPlane(), r.kubevirtCluster())
	for _, p := range r.pools {
		objs, boot, err := r.pool(p)
		if err != nil {
			return nil, err
		}
		out.Objects = append(out.Objects, objs...)
		if boot != nil {
			out.Bootstrap = append(out.Bootstrap, boot)
		}
	}
	return out, nil
}

func (r *renderer) cluster() *unstructured.Unstructured {
	c := object(ClusterGVK, r.app.Namespace, r.release, r.labels())
	c.Object["spec"] = map[string]any{
		"clusterNetwork": map[string]any{
			"pods":     map[string]any{"cidrBlocks": []any{PodCIDR}},
			"services": map[string]any{"cidrBlocks": []any{ServiceCIDR}},
		},
		"controlPlaneRef":   ref(KamajiControlPlaneGVK, r.app.Namespace, r.release),
		"infrastructureRef": ref(KubevirtClusterGVK, r.app.Namespace, r.release),
	}
	return c
}

func (r *renderer) controlPlane() *unstructured.Unstructured {
	kcp := object(KamajiControlPlaneGVK, r.app.Namespace, r.release, merge(r.labels(), map[string]string{"cluster.x-k8s.io/role": "control-plane"}))
	kcp.SetAnnotations(map[string]string{"kamaji.clastix.io/kubeconfig-secret-key": "super-admin.svc"})
	// The tenant CoreDNS address, derived from the Service CIDR the Cluster declares (the
	// seed's #4911 commit 1: the KamajiControlPlane publishes it); under the
	// cluster-dns-mismatch fault an address no CoreDNS Service holds.
	ip, _ := kamaji.DNSServiceIP(ServiceCIDR)
	if r.wrongDNS {
		ip, _ = kamaji.NthServiceIP(ServiceCIDR, 53)
	}
	dns := []any{ip}
	replicas := int64(2)
	if cp, ok := r.app.Spec["controlPlane"].(map[string]any); ok {
		if n, ok := cp["replicas"].(int64); ok {
			replicas = n
		}
	}
	kcp.Object["spec"] = map[string]any{
		"dataStoreName": r.app.Namespace,
		"replicas":      replicas,
		"version":       r.version,
		"network":       map[string]any{"serviceType": "ClusterIP", "dnsServiceIPs": dns},
		"addons":        map[string]any{"coreDNS": map[string]any{}, "konnectivity": map[string]any{}},
		"additionalMetadata": map[string]any{
			"labels": map[string]any{"policy.cozystack.io/allow-to-etcd": "true"},
		},
	}
	return kcp
}

func (r *renderer) kubevirtCluster() *unstructured.Unstructured {
	kc := object(KubevirtClusterGVK, r.app.Namespace, r.release, r.labels())
	kc.SetAnnotations(map[string]string{"cluster.x-k8s.io/managed-by": "kamaji"})
	kc.Object["spec"] = map[string]any{}
	return kc
}

func (r *renderer) labels() map[string]string {
	return map[string]string{
		"cluster.x-k8s.io/cluster-name":       r.release,
		"apps.cozystack.io/application.group": "apps.cozystack.io",
		"apps.cozystack.io/application.kind":  "Kubernetes",
		"apps.cozystack.io/application.name":  r.app.Name,
	}
}

func object(gvk schema.GroupVersionKind, namespace, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	if len(labels) > 0 {
		u.SetLabels(labels)
	}
	return u
}

func ref(gvk schema.GroupVersionKind, namespace, name string) map[string]any {
	m := map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "name": name}
	if namespace != "" {
		m["namespace"] = namespace
	}
	return m
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

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
