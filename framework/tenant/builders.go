package tenant

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
)

// ClusterSpec is a Kubernetes app.
type ClusterSpec struct {
	Names Names
	// Version is the platform's versions key ("v1.35"), not the patch.
	Version string
	// Pools are its node groups, as the lane declares them.
	Pools []lane.Pool
}

// ClassFamily is the OS family of class name: a built-in's by its name, an operator class's from
// the lane's classes. A class the lane does not declare, or an OS the harness does not know, is
// an error naming what is known.
func ClassFamily(l *lane.Lane, name string) (osfamily.Family, error) {
	if osfamily.IsBuiltInClass(name) {
		return osfamily.Lookup(name)
	}
	for _, c := range l.Classes {
		if c.Name == name {
			f, err := osfamily.Lookup(c.OS)
			if err != nil {
				return f, fmt.Errorf("%s: class %s: %w", l.File, name, err)
			}
			return f, nil
		}
	}
	return osfamily.Family{}, fmt.Errorf("%s: class %q is neither a built-in (%s) nor in the lane's classes", l.File, name, strings.Join(osfamily.Names(), ", "))
}

// TenantApp is the Tenant app of a run, in RootNamespace: an isolated tenant without the
// optional services, so it costs nothing but its namespace.
func TenantApp(r Run) *unstructured.Unstructured {
	u := newObject(TenantGVK, RootNamespace, r.TenantName())
	u.Object["spec"] = map[string]any{
		"host":       "",
		"etcd":       false,
		"monitoring": false,
		"ingress":    false,
		"seaweedfs":  false,
		"isolated":   true,
	}
	return u
}

// KubernetesApp is the Kubernetes app for spec, shaped like the one today's e2e applies,
// with one nodeGroups entry per pool.
func KubernetesApp(spec ClusterSpec) *unstructured.Unstructured {
	u := newObject(KubernetesGVK, spec.Names.Namespace, spec.Names.Name)
	groups := map[string]any{}
	for _, p := range spec.Pools {
		groups[p.Name] = NodeGroup(p)
	}
	u.Object["spec"] = map[string]any{
		"version":      spec.Version,
		"storageClass": "replicated",
		"host":         "",
		"controlPlane": map[string]any{
			"replicas":          int64(2),
			"apiServer":         map[string]any{"resourcesPreset": "c1.medium"},
			"controllerManager": map[string]any{"resourcesPreset": "micro"},
			"scheduler":         map[string]any{"resourcesPreset": "micro"},
			"konnectivity":      map[string]any{"server": map[string]any{"resourcesPreset": "micro"}},
		},
		"addons": map[string]any{
			"certManager":      map[string]any{"enabled": false},
			"gatewayAPI":       map[string]any{"enabled": false},
			"gpuOperator":      map[string]any{"enabled": false},
			"ingressNginx":     map[string]any{"enabled": false},
			"monitoringAgents": map[string]any{"enabled": false},
		},
		"nodeGroups": groups,
	}
	return u
}

// A worker's resources as NodeGroup renders every pool (nodeGroups.<pool>.resources).
const (
	WorkerCPU       = "1"
	WorkerMemoryGiB = 4
)

// NodeGroup is one nodeGroups.<pool> entry. Replicas pins minReplicas and maxReplicas, so the
// autoscaler never adds a worker (a pool at zero stays empty even with Pending system pods).
func NodeGroup(p lane.Pool) map[string]any {
	g := map[string]any{
		"nodeGroupClassName": p.Class,
		"minReplicas":        int64(p.Replicas),
		"maxReplicas":        int64(p.Replicas),
		"instanceType":       "u1.medium",
		"diskSize":           "20Gi",
		"resources":          map[string]any{"cpu": WorkerCPU, "memory": fmt.Sprintf("%dGi", WorkerMemoryGiB)},
		"podCpuLimit":        "2",
		"podCpuRequest":      "100m",
		"roles":              []any{"ingress-nginx"},
		"logSerialConsole":   p.LogSerialConsole,
		"gpus":               []any{},
	}
	return g
}

// NodeGroupClass is an operator class as the lane declares it.
func NodeGroupClass(c lane.Class) *unstructured.Unstructured {
	u := newObject(NodeGroupClassGVK, "", c.Name)
	spec := map[string]any{"os": c.OS}
	if c.Image != "" {
		spec["image"] = c.Image
	}
	if c.KubernetesVersion != "" {
		spec["kubernetesVersion"] = c.KubernetesVersion
	}
	u.Object["spec"] = spec
	return u
}

// PoolKubelet is the kubelet version pool p's workers must report: the class's
// kubernetesVersion for an operator class that names an image, else the release of the pool's
// conformance cluster (lane.Lane.Release).
func PoolKubelet(l *lane.Lane, p lane.Pool) string {
	for _, c := range l.Classes {
		if c.Name == p.Class && c.Image != "" && c.KubernetesVersion != "" {
			return c.KubernetesVersion
		}
	}
	return l.Release(p).Patch
}

// LabelManagedBy marks every object the harness creates, so a person (and teardown) can find them.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "cozy-e2e"
)

func newObject(gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(map[string]string{LabelManagedBy: ManagedBy})
	return u
}
