package diag

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// pools attributes an object to the pool it belongs to by what upstream writes on it, never
// by its name's prefix (app a-b's objects begin with app a's pool b's name):
//   - Cluster API's labels cluster.x-k8s.io/cluster-name and cluster.x-k8s.io/deployment-name,
//     which Cluster API puts on a MachineDeployment's MachineSets and Machines and on the
//     bootstrap configs and infrastructure machines it clones for them (sigs.k8s.io/cluster-api
//     v1.13.6 internal/controllers/machinedeployment/machinedeployment_rollout_planner.go:308-312,
//     internal/controllers/machineset/machineset_controller.go:1192,1828-1870);
//   - the MachineDeployment and MachineHealthCheck the chart names R-<pool> exactly;
//   - CAPK's label kubevirt.io/vm on a VirtualMachine, naming its KubevirtMachine
//     (cluster-api-provider-kubevirt v0.1.10 pkg/kubevirt/utils.go:96-99);
//   - owner references: KubeVirt's VMI to its VM, launcher to its VMI (with the label
//     kubevirt.io/created-by, the VMI's UID), DataVolume to its VM; CDI's claim to its
//     DataVolume, importer to its claim;
//   - a tenant Node: Cluster API's annotations cluster.x-k8s.io/machine and
//     cluster-namespace, else its providerID kubevirt://<vmi>, else an InternalIP one of the
//     pool's VMIs reports (a Kairos metal-<id> Node before it is linked).
//
// The streams teach it every object they see (both clusters, deleted ones kept); a collector
// teaches it what it lists before it asks.
type pools struct {
	mu    sync.RWMutex
	list  []tenant.PoolNames
	objs  map[objKey]*objInfo
	names map[nameKey]objKey
	// apps are the Kubernetes apps of the tenant clusters, by their artifacts name.
	apps map[string]tenant.Names
}

type objKey struct {
	cluster string
	uid     types.UID
}

type nameKey struct{ cluster, kind, namespace, name string }

// objInfo is what attribution reads of one object.
type objInfo struct {
	kind, namespace, name string
	labels, annotations   map[string]string
	// owners are its owner references' UIDs, the controller first.
	owners     []types.UID
	providerID string
	ips        []string // a VMI's interface addresses, a Node's InternalIPs
	gone       bool
}

// add starts attributing objects to pool pn; it reports whether pn is new.
func (p *pools) add(pn tenant.PoolNames) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, have := range p.list {
		if have == pn {
			return false
		}
	}
	p.list = append(p.list, pn)
	return true
}

// setTenant says that cluster is the tenant cluster of app: its Nodes belong to app's pools only.
func (p *pools) setTenant(cluster string, app tenant.Names) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.apps == nil {
		p.apps = map[string]tenant.Names{}
	}
	p.apps[cluster] = app
}

// learn records object o of kind in cluster (gone: it was deleted).
func (p *pools) learn(cluster, kind string, o metav1.Object, gone bool) {
	info := &objInfo{kind: kind, namespace: o.GetNamespace(), name: o.GetName(), labels: o.GetLabels(), annotations: o.GetAnnotations(), gone: gone}
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			info.owners = append([]types.UID{ref.UID}, info.owners...)
		} else {
			info.owners = append(info.owners, ref.UID)
		}
	}
	switch x := o.(type) {
	case *corev1.Node:
		info.providerID = x.Spec.ProviderID
		info.ips = nodeIPs(x.Status.Addresses)
	case *unstructured.Unstructured:
		info.providerID, _, _ = unstructured.NestedString(x.Object, "spec", "providerID")
		info.ips = unstructuredIPs(kind, x)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.objs == nil {
		p.objs, p.names = map[objKey]*objInfo{}, map[nameKey]objKey{}
	}
	k := objKey{cluster, o.GetUID()}
	p.objs[k] = info
	nk := nameKey{cluster, kind, info.namespace, info.name}
	if prev, ok := p.names[nk]; !ok || !gone || p.objs[prev] == nil || p.objs[prev].gone {
		p.names[nk] = k
	}
}

// of learns object o of kind in cluster and returns the pool it belongs to.
func (p *pools) of(cluster, kind string, o metav1.Object) (tenant.PoolNames, bool) {
	p.learn(cluster, kind, o, false)
	return p.ofRef(cluster, kind, o.GetNamespace(), o.GetName(), o.GetUID())
}

// ofRef is the pool of the object a reference names (an event's involvedObject, a console's
// VMI): by its UID when the object was seen, else by kind and name.
func (p *pools) ofRef(cluster, kind, namespace, name string, uid types.UID) (tenant.PoolNames, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	k := objKey{cluster, uid}
	if _, ok := p.objs[k]; uid == "" || !ok {
		if k, ok = p.names[nameKey{cluster, kind, namespace, name}]; !ok {
			return tenant.PoolNames{}, false
		}
	}
	return p.resolve(k, 0)
}

// resolve follows an object to its pool; depth bounds the owner chain. Under p.mu.
func (p *pools) resolve(k objKey, depth int) (tenant.PoolNames, bool) {
	info := p.objs[k]
	if info == nil || depth > 8 {
		return tenant.PoolNames{}, false
	}
	if k.cluster != Management {
		return p.ofNode(k.cluster, info, depth)
	}
	if md := info.labels[clusterv1.MachineDeploymentNameLabel]; md != "" {
		return p.byDeployment(info.namespace, info.labels[clusterv1.ClusterNameLabel], md)
	}
	switch info.kind {
	case "MachineDeployment", "MachineHealthCheck":
		return p.byDeployment(info.namespace, info.labels[clusterv1.ClusterNameLabel], info.name)
	case "VirtualMachine":
		if km, ok := p.names[nameKey{Management, tenant.KubevirtMachineGVK.Kind, info.namespace, info.labels[labelVM]}]; ok {
			return p.resolve(km, depth+1)
		}
	}
	if uid := tenant.LauncherVMIUID(info.labels); uid != "" {
		if pn, ok := p.resolve(objKey{Management, types.UID(uid)}, depth+1); ok {
			return pn, true
		}
	}
	for _, o := range info.owners {
		if pn, ok := p.resolve(objKey{Management, o}, depth+1); ok {
			return pn, true
		}
	}
	return tenant.PoolNames{}, false
}

// byDeployment is the pool of MachineDeployment md in namespace ns, of cluster cluster when
// the object names one.
func (p *pools) byDeployment(ns, cluster, md string) (tenant.PoolNames, bool) {
	for _, pn := range p.list {
		if pn.Namespace == ns && pn.MachineDeployment() == md && (cluster == "" || cluster == pn.Cluster()) {
			return pn, true
		}
	}
	return tenant.PoolNames{}, false
}

// ofNode is the pool of a tenant Node: by the Machine Cluster API linked it to, else by the VMI
// its providerID names, else by the VMI whose address it reports. Under p.mu.
func (p *pools) ofNode(cluster string, info *objInfo, depth int) (tenant.PoolNames, bool) {
	if info.kind != "Node" {
		return tenant.PoolNames{}, false
	}
	app, bound := p.apps[cluster]
	mine := func(pn tenant.PoolNames, ok bool) (tenant.PoolNames, bool) {
		if !ok || (bound && pn.Names != app) {
			return tenant.PoolNames{}, false
		}
		return pn, true
	}
	if m, ns := info.annotations[tenant.AnnotationMachine], info.annotations[tenant.AnnotationClusterNamespace]; m != "" && ns != "" {
		if k, ok := p.names[nameKey{Management, "Machine", ns, m}]; ok {
			if pn, ok := mine(p.resolve(k, depth+1)); ok {
				return pn, true
			}
		}
	}
	if vmi, ok := tenant.VMIFromProviderID(info.providerID); ok {
		for _, pn := range p.list {
			if k, ok := p.names[nameKey{Management, "VirtualMachineInstance", pn.Namespace, vmi}]; ok {
				if pn, ok := mine(p.resolve(k, depth+1)); ok {
					return pn, true
				}
			}
		}
		return tenant.PoolNames{}, false // another VMI's Node, or one the run never saw
	}
	for k, o := range p.objs {
		if k.cluster != Management || o.kind != "VirtualMachineInstance" || o.gone || !shares(o.ips, info.ips) {
			continue
		}
		if pn, ok := mine(p.resolve(k, depth+1)); ok {
			return pn, true
		}
	}
	return tenant.PoolNames{}, false
}

// labelVM is CAPK's label on a VirtualMachine naming its KubevirtMachine
// (cluster-api-provider-kubevirt v0.1.10 pkg/kubevirt/utils.go:97).
const labelVM = "kubevirt.io/vm"

func shares(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func nodeIPs(addrs []corev1.NodeAddress) []string {
	var out []string
	for _, a := range addrs {
		if a.Type == corev1.NodeInternalIP {
			out = append(out, a.Address)
		}
	}
	return out
}

// unstructuredIPs are a VMI's interface addresses, or a Node's InternalIPs.
func unstructuredIPs(kind string, u *unstructured.Unstructured) []string {
	var out []string
	switch kind {
	case "VirtualMachineInstance":
		ifcs, _, _ := unstructured.NestedSlice(u.Object, "status", "interfaces")
		for _, i := range ifcs {
			m, _ := i.(map[string]any)
			if ip, _ := m["ipAddress"].(string); ip != "" {
				out = append(out, ip)
			}
			ips, _ := m["ipAddresses"].([]any)
			for _, ip := range ips {
				if s, _ := ip.(string); s != "" {
					out = append(out, s)
				}
			}
		}
	case "Node":
		addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
		for _, a := range addrs {
			m, _ := a.(map[string]any)
			if m["type"] == string(corev1.NodeInternalIP) {
				if s, _ := m["address"].(string); s != "" {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// poolDir is the pool's folder under the artifacts root (docs/architecture.md: pools/<pool>/).
func poolDir(pn tenant.PoolNames) string { return "pools/" + pn.Pool }

// vmiOfLauncher is the VMI a virt-launcher Pod runs: its controller owner, which KubeVirt sets
// to the VMI together with the kubevirt.io/created-by label (kubevirt/kubevirt v1.8.4
// pkg/virt-controller/services/template.go:641-643, :1614). "" when the Pod is no launcher.
func vmiOfLauncher(p *corev1.Pod) string {
	if tenant.LauncherVMIUID(p.Labels) == "" {
		return ""
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "VirtualMachineInstance" && string(o.UID) == tenant.LauncherVMIUID(p.Labels) {
			return o.Name
		}
	}
	return ""
}
