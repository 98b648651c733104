package join

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// Record is what a pool showed right after it joined: every object the conformance contract
// speaks of, read once, so a spec judges the pool on what it did and not on what is left of
// it when the spec gets its turn (another pool may have used up the phase's time by then). A
// nil field is an object that did not exist.
type Record struct {
	Result *Result
	// MachineDeployment read at v1beta2 once its ready replicas reached the pool's.
	MachineDeployment *clusterv1.MachineDeployment
	// BootstrapTemplate is the template MachineDeployment's bootstrap.configRef names, read as
	// the kind its class calls for.
	BootstrapTemplate *unstructured.Unstructured
	// MachineTemplate is the KubevirtMachineTemplate MachineDeployment's infrastructureRef names.
	MachineTemplate    *unstructured.Unstructured
	MachineHealthCheck *clusterv1.MachineHealthCheck
	// Machines are the pool's Machines not being deleted, each with what hangs off it.
	Machines []MachineRecord
	// ControlPlaneVersion is the version the tenant control plane runs at, as Kamaji reports it
	// once its Deployment rolled out at that version (TenantControlPlane
	// status.kubernetesResources.version.version, which it sets from spec.kubernetes.version
	// with the images of that tag: clastix/kamaji
	// internal/resources/k8s_deployment_resource.go:104-110 (UpdateTenantControlPlaneStatus),
	// internal/builders/controlplane/deployment.go:598 (KubeAPIServerImage)); the tenant
	// apiserver's gitVersion when no TenantControlPlane reports one. The sim's Kamaji stand-in
	// runs its one built apiserver whatever version is asked and reports the one asked, as
	// Kamaji does.
	ControlPlaneVersion string
	// KubeletConfig and ClusterDNSService are read for kubeadm-joined pools only.
	KubeletConfig     *corev1.ConfigMap
	ClusterDNSService *corev1.Service
}

// MachineRecord is one Machine and its KubevirtMachine, VMI, tenant Node and workload pod.
type MachineRecord struct {
	Machine         clusterv1.Machine
	KubevirtMachine *unstructured.Unstructured
	VMI             *kubevirtv1.VirtualMachineInstance
	Node            *corev1.Node
	Workload        *corev1.Pod
}

// InspectOptions say where a pool lives.
type InspectOptions struct {
	Management, Tenant *cluster.Cluster
	Log                func(format string, a ...any)
}

// Inspect reads pool p's objects once its join finished with res. It first waits, inside ctx,
// for the MachineDeployment to count the pool's replicas ready (Cluster API updates its status
// a moment after the Nodes turn Ready). An API error is returned naming the pool; a missing
// object is left nil for the spec to judge.
func Inspect(ctx context.Context, o InspectOptions, p Pool, res *Result) (*Record, error) {
	n := p.Names
	mgmt := o.Management.Client
	rec := &Record{Result: res}
	wrap := func(what string, err error) error {
		return fmt.Errorf("pool %s: reading %s: %w", n.Pool, what, err)
	}
	md, err := waitMachineDeploymentReady(ctx, o.Management, p)
	if err != nil {
		return nil, err
	}
	rec.MachineDeployment = md
	if ref := md.Spec.Template.Spec.Bootstrap.ConfigRef; ref.Name != "" {
		if rec.BootstrapTemplate, err = getU(ctx, mgmt, p.OS.BootstrapTemplate, n.Namespace, ref.Name); err != nil {
			return nil, wrap("the bootstrap template", err)
		}
	}
	if name := md.Spec.Template.Spec.InfrastructureRef.Name; name != "" {
		if rec.MachineTemplate, err = getU(ctx, mgmt, tenant.KubevirtMachineTemplateGVK, n.Namespace, name); err != nil {
			return nil, wrap("the KubevirtMachineTemplate", err)
		}
	}
	mhc := &clusterv1.MachineHealthCheck{}
	if ok, err := get(ctx, mgmt, n.Namespace, n.MachineHealthCheck(), mhc); err != nil {
		return nil, wrap("the MachineHealthCheck", err)
	} else if ok {
		rec.MachineHealthCheck = mhc
	}
	tcp, err := getU(ctx, mgmt, tenant.TenantControlPlaneGVK, n.Namespace, n.ControlPlane())
	if err != nil {
		return nil, wrap("the TenantControlPlane", err)
	}
	if tcp != nil {
		rec.ControlPlaneVersion, _, _ = unstructured.NestedString(tcp.Object, "status", "kubernetesResources", "version", "version")
	}
	if rec.ControlPlaneVersion == "" {
		v, err := o.Tenant.Kube.Discovery().ServerVersion()
		if err != nil {
			return nil, wrap("the tenant control plane's version", err)
		}
		rec.ControlPlaneVersion = v.GitVersion
	}
	var machines clusterv1.MachineList
	if err := mgmt.List(ctx, &machines, client.InNamespace(n.Namespace), n.Selector()); err != nil {
		return nil, wrap("its Machines", err)
	}
	for _, m := range machines.Items {
		if m.DeletionTimestamp != nil {
			continue
		}
		mr, err := inspectMachine(ctx, o, p, m)
		if err != nil {
			return nil, wrap("Machine "+m.Name, err)
		}
		rec.Machines = append(rec.Machines, mr)
	}
	if p.OS.Kubeadm {
		cm := &corev1.ConfigMap{}
		if ok, err := get(ctx, o.Tenant.Client, tenant.KubeletConfigNamespace, tenant.KubeletConfigName, cm); err != nil {
			return nil, wrap("the tenant kubelet-config", err)
		} else if ok {
			rec.KubeletConfig = cm
		}
		svc := &corev1.Service{}
		if ok, err := get(ctx, o.Tenant.Client, tenant.CoreDNSNamespace, tenant.CoreDNSService, svc); err != nil {
			return nil, wrap("the tenant CoreDNS Service", err)
		} else if ok {
			rec.ClusterDNSService = svc
		}
	}
	return rec, nil
}

func inspectMachine(ctx context.Context, o InspectOptions, p Pool, m clusterv1.Machine) (MachineRecord, error) {
	mr := MachineRecord{Machine: m}
	ns := p.Names.Namespace
	name := m.Spec.InfrastructureRef.Name
	var err error
	if name != "" {
		if mr.KubevirtMachine, err = getU(ctx, o.Management.Client, tenant.KubevirtMachineGVK, ns, name); err != nil {
			return mr, err
		}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if ok, err := get(ctx, o.Management.Client, ns, name, vmi); err != nil {
			return mr, err
		} else if ok {
			mr.VMI = vmi
		}
	}
	if ref := m.Status.NodeRef.Name; ref != "" {
		node := &corev1.Node{}
		if ok, err := get(ctx, o.Tenant.Client, "", ref, node); err != nil {
			return mr, err
		} else if ok {
			mr.Node = node
			pod := &corev1.Pod{}
			if ok, err := get(ctx, o.Tenant.Client, tenant.WorkloadNamespace, tenant.WorkloadPod(node.Name), pod); err != nil {
				return mr, err
			} else if ok {
				mr.Workload = pod
			}
		}
	}
	return mr, nil
}

// waitMachineDeploymentReady waits, watch-driven, until the pool's MachineDeployment read at
// v1beta2 counts as many ready replicas as the pool wants, and returns it.
func waitMachineDeploymentReady(ctx context.Context, mgmt *cluster.Cluster, p Pool) (*clusterv1.MachineDeployment, error) {
	ref := tenant.Ref{GVK: clusterv1.GroupVersion.WithKind("MachineDeployment"), Namespace: p.Names.Namespace, Name: p.Names.MachineDeployment()}
	err := tenant.Wait(ctx, mgmt, tenant.WaitOptions{Pool: p.Names.Pool, What: "MachineDeployment " + ref.Name + " ready replicas",
		Watch: []tenant.Ref{ref},
		Judge: func(objs tenant.Objects) (bool, string, error) {
			md := objs.Get(ref)
			if md == nil {
				return false, "not found", nil
			}
			ready, _, _ := unstructured.NestedInt64(md.Object, "status", "readyReplicas")
			want, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
			return ready == want && want == int64(p.Spec.Replicas),
				fmt.Sprintf("readyReplicas %d, spec.replicas %d, pool replicas %d", ready, want, p.Spec.Replicas), nil
		}})
	if err != nil {
		return nil, err
	}
	md := &clusterv1.MachineDeployment{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, md); err != nil {
		return nil, fmt.Errorf("pool %s: reading MachineDeployment %s: %w", p.Names.Pool, ref.Name, err)
	}
	return md, nil
}

func getU(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := unstructuredOf(gvk)
	ok, err := get(ctx, c, ns, name, u)
	if !ok || err != nil {
		return nil, err
	}
	return u, nil
}
