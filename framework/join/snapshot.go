package join

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// read fills a snapshot of pool p from the informers' stores (no API request).
func (w *Watcher) read(ctx context.Context, p followed) (*snapshot, error) {
	ns := w.o.Namespace
	s := &snapshot{Pool: p}
	var err error
	if s.Template, err = getU(ctx, w.mgmt, p.OS.BootstrapTemplate, ns, p.Names.BootstrapTemplate()); err != nil {
		return nil, err
	}
	for _, f := range w.families {
		if f.BootstrapTemplate != p.OS.BootstrapTemplate {
			if s.OtherTemplate, err = getU(ctx, w.mgmt, f.BootstrapTemplate, ns, p.Names.BootstrapTemplate()); err != nil {
				return nil, err
			}
		}
	}
	md := &clusterv1.MachineDeployment{}
	if ok, err := get(ctx, w.mgmt, ns, p.Names.MachineDeployment(), md); err != nil {
		return nil, err
	} else if ok {
		s.MachineDeployment = md
	}
	var machines clusterv1.MachineList
	if err := w.mgmt.List(ctx, &machines, client.InNamespace(ns), p.Names.Selector()); err != nil {
		return nil, fmt.Errorf("join: listing Machines of %s: %w", p.Names, err)
	}
	var sets clusterv1.MachineSetList
	if err := w.mgmt.List(ctx, &sets, client.InNamespace(ns), p.Names.Selector()); err != nil {
		return nil, fmt.Errorf("join: listing MachineSets of %s: %w", p.Names, err)
	}
	s.MachineSets = sets.Items
	var pods corev1.PodList
	if err := w.mgmt.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var mgmtNodes corev1.NodeList
	if err := w.mgmt.List(ctx, &mgmtNodes); err != nil {
		return nil, fmt.Errorf("join: listing the management cluster's Nodes: %w", err)
	}
	var nodes corev1.NodeList
	if err := w.tenant.List(ctx, &nodes); err != nil {
		return nil, err
	}
	var csrs certificatesv1.CertificateSigningRequestList
	if err := w.tenant.List(ctx, &csrs); err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if ok, err := get(ctx, w.tenant, tenant.KubeletConfigNamespace, tenant.KubeletConfigName, cm); err != nil {
		return nil, err
	} else if ok {
		s.KubeletConfig = cm
	}
	dns := &corev1.Service{}
	if ok, err := get(ctx, w.tenant, tenant.CoreDNSNamespace, tenant.CoreDNSService, dns); err != nil {
		return nil, err
	} else if ok {
		s.ClusterDNSService = dns
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if m.DeletionTimestamp != nil {
			continue
		}
		v := &machineView{Machine: m, ManagementNodes: mgmtNodes.Items}
		if err := w.readMachine(ctx, p, v, pods.Items, nodes.Items, csrs.Items); err != nil {
			return nil, err
		}
		s.Machines = append(s.Machines, v)
	}
	return s, nil
}

func (w *Watcher) readMachine(ctx context.Context, p followed, v *machineView, pods []corev1.Pod, nodes []corev1.Node,
	csrs []certificatesv1.CertificateSigningRequest) error {
	ns := w.o.Namespace
	vm := v.vmName()
	var err error
	if v.KubevirtMachine, err = getU(ctx, w.mgmt, tenant.KubevirtMachineGVK, ns, vm); err != nil {
		return err
	}
	if ref := v.Machine.Spec.Bootstrap.ConfigRef.Name; ref != "" {
		if v.BootstrapConfig, err = getU(ctx, w.mgmt, p.OS.BootstrapConfig, ns, ref); err != nil {
			return err
		}
	}
	dv := &cdiv1.DataVolume{}
	if ok, err := get(ctx, w.mgmt, ns, tenant.DataVolume(vm), dv); err != nil {
		return err
	} else if ok {
		v.DataVolume = dv
	}
	vmObj := &kubevirtv1.VirtualMachine{}
	if ok, err := get(ctx, w.mgmt, ns, vm, vmObj); err != nil {
		return err
	} else if ok {
		v.VM = vmObj
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if ok, err := get(ctx, w.mgmt, ns, vm, vmi); err != nil {
		return err
	} else if ok {
		v.VMI = vmi
	}
	for i := range pods {
		pod := &pods[i]
		switch {
		case pod.Name == tenant.ImporterPod(tenant.DataVolume(vm)):
			v.Importer = pod
		case v.VMI != nil && tenant.LauncherVMIUID(pod.Labels) == string(v.VMI.UID) && pod.DeletionTimestamp == nil:
			if pod.Annotations[tenant.AnnotationEphemeralProvisioning] == "true" {
				// The temporary launcher of a volume waiting for its first consumer: it can be
				// unschedulable as the real one can, but it runs no guest.
				v.Temporary = pod
				continue
			}
			if v.Launcher == nil || pod.CreationTimestamp.After(v.Launcher.CreationTimestamp.Time) {
				v.Launcher = pod
			}
		}
	}
	if v.VMI != nil && p.Console {
		w.consoles.judge(string(v.VMI.UID), p.OS)
		if st, ok := w.consoles.get(string(v.VMI.UID)); ok {
			v.Console = &st
		}
	}
	v.Node = attributeNode(vm, v.VMI, nodes)
	v.CSRs = csrsOf(vm, v.VMI, v.Node, csrs)
	if v.Node != nil {
		pod := &corev1.Pod{}
		if ok, err := get(ctx, w.tenant, tenant.WorkloadNamespace, tenant.WorkloadPod(v.Node.Name), pod); err != nil {
			return err
		} else if ok {
			v.Workload = pod
		}
	}
	if v.Workload != nil && v.Workload.Status.Phase != corev1.PodRunning {
		var events corev1.EventList
		if err := w.tenant.List(ctx, &events, client.InNamespace(tenant.WorkloadNamespace)); err != nil {
			return err
		}
		v.WorkloadWarning = lastWarning(v.Workload, events.Items)
	}
	return nil
}

// attributeNode finds the tenant Node VMI vm registered as: the Node of its name, else the Node
// carrying its providerID (a kubelet that set --provider-id under a name of its own), else the
// Node whose InternalIP is one of the VMI's addresses (the guest's NIC is the VMI's) and that is
// not another VMI's own (named like it, with its providerID): a pod address is reused once its
// pod is gone, and a Node whose guest went away keeps the address it had (a stopped worker's,
// until it is replaced).
func attributeNode(vm string, vmi *kubevirtv1.VirtualMachineInstance, nodes []corev1.Node) *corev1.Node {
	for i := range nodes {
		if nodes[i].Name == vm {
			return &nodes[i]
		}
	}
	for i := range nodes {
		if nodes[i].Spec.ProviderID == tenant.ProviderID(vm) {
			return &nodes[i]
		}
	}
	if vmi == nil {
		return nil
	}
	ips := vmiAddresses(vmi)
	for i := range nodes {
		if other, ok := tenant.VMIFromProviderID(nodes[i].Spec.ProviderID); ok && other != vm && other == nodes[i].Name {
			continue
		}
		for _, a := range nodes[i].Status.Addresses {
			if a.Type == corev1.NodeInternalIP && ips[a.Address] {
				return &nodes[i]
			}
		}
	}
	return nil
}

// csrsOf are the kubelet CSRs of VMI vm, found the way the join ties a Node to its VMI: by the
// node name they ask a certificate for (CN system:node:<name>, k8s.io/kubernetes v1.35.4
// pkg/kubelet/certificate/kubelet.go:64,233) when it is the VMI's or the Node's the VMI
// registered as, or by an address of the VMI that a serving request names (its IP SANs, the
// Node's addresses: kubelet.go:40-70); a name so tied to the VMI ties its other requests too.
// A worker named otherwise (Kairos: metal-<id>) is found so.
func csrsOf(vm string, vmi *kubevirtv1.VirtualMachineInstance, node *corev1.Node, csrs []certificatesv1.CertificateSigningRequest) []certificatesv1.CertificateSigningRequest {
	names := map[string]bool{vm: true}
	if node != nil {
		names[node.Name] = true
	}
	ips := vmiAddresses(vmi)
	for i := range csrs {
		req := csrRequest(&csrs[i])
		if req == nil {
			continue
		}
		for _, ip := range req.IPAddresses {
			if ips[ip.String()] {
				if name, ok := strings.CutPrefix(req.Subject.CommonName, csrNodePrefix); ok {
					names[name] = true
				}
			}
		}
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, c := range csrs {
		if n := csrNode(&c); n != "" && names[n] {
			out = append(out, c)
		}
	}
	return out
}

// vmiAddresses are the IP addresses a VMI reports on its interfaces.
func vmiAddresses(vmi *kubevirtv1.VirtualMachineInstance) map[string]bool {
	ips := map[string]bool{}
	if vmi == nil {
		return ips
	}
	for _, ifc := range vmi.Status.Interfaces {
		if ifc.IP != "" {
			ips[ifc.IP] = true
		}
		for _, ip := range ifc.IPs {
			ips[ip] = true
		}
	}
	return ips
}

// csrNode is the Node name a kubelet CSR asks a certificate for (CN system:node:<name>).
func csrNode(c *certificatesv1.CertificateSigningRequest) string {
	req := csrRequest(c)
	if req == nil {
		return ""
	}
	name, ok := strings.CutPrefix(req.Subject.CommonName, csrNodePrefix)
	if !ok {
		return ""
	}
	return name
}

// csrRequest is a CSR's parsed request, nil when it does not parse.
func csrRequest(c *certificatesv1.CertificateSigningRequest) *x509.CertificateRequest {
	block, _ := pem.Decode(c.Spec.Request)
	if block == nil {
		return nil
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil
	}
	return req
}

func get(ctx context.Context, c client.Reader, ns, name string, obj client.Object) (bool, error) {
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("join: reading %T %s/%s: %w", obj, ns, name, err)
	}
	return true, nil
}
