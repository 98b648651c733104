package join

import (
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// detectMachine runs every detector on one Machine's objects: the first final state it finds
// ends the join; every suspect is reported beside it.
func detectMachine(p followed, v *machineView) (*terminal, []Suspect) {
	m := v.Machine
	var found []Suspect
	suspect := func(s *Suspect) {
		if s != nil {
			found = append(found, *s)
		}
	}
	if m.Spec.Bootstrap.DataSecretName == nil || *m.Spec.Bootstrap.DataSecretName == "" {
		suspect(providerFailure(v.BootstrapConfig, verdict.Bootstrap, StageBootstrapData,
			"its provider clears it once a reconcile succeeds"))
		suspect(dataSecretFailure(v.BootstrapConfig))
	}
	if t := diskFailure(v.DataVolume, v.Importer); t != nil {
		return t, found
	}
	suspect(diskSuspect(v.DataVolume))
	suspect(importerSuspect(v.DataVolume, v.Importer))
	t, vmSuspects := vmState(v)
	found = append(found, vmSuspects...)
	if t != nil {
		return t, found
	}
	at := machineStageGuess(p, v)
	suspect(providerFailure(v.KubevirtMachine, verdict.MachineFailed, at,
		"CAPK never clears it; under runStrategy Always KubeVirt starts the VM again"))
	suspect(machineFailure(m, at))
	suspect(consoleRefusal(p, v))
	for _, csr := range v.CSRs {
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
			continue // a serving certificate refused does not keep the kubelet out
		}
		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
				return &terminal{Class: verdict.JoinRejected, Stage: StageJoin,
					Detail: fmt.Sprintf("tenant CSR %s of %s was %s: %s %s", csr.Name, csr.Spec.Username, c.Type, c.Reason, c.Message)}, found
			}
		}
	}
	if n := v.Node; n != nil {
		t, s := identityFailure(p, v, n)
		suspect(s)
		if t != nil {
			return t, found
		}
		if ok, _ := nodeReady(n); ok {
			t, s := taintFailure(n)
			suspect(s)
			if t != nil {
				return t, found
			}
		}
		if w := v.Workload; w != nil && w.Status.Phase == corev1.PodFailed {
			return &terminal{Class: verdict.NotSchedulable, Stage: StageWorkloadPod,
				Detail: fmt.Sprintf("workload pod %s/%s on Node %s Failed: %s %s", w.Namespace, w.Name, n.Name, w.Status.Reason, w.Status.Message)}, found
		}
	}
	return nil, found
}

// consoleRefusal is a failed join attempt on the guest's console, as a suspect: every family
// that says so tries again (osfamily.Family.ConsoleRetry): Kairos's kubeadm provider runs
// kubeadm join in a loop, resetting the node and trying again 10 s after each failure until one
// succeeds (kairos-io/provider-kubeadm v4.10.0 scripts/kube-join.sh:74-82, the "Run Kubeadm
// Join" stage of stages/join.go:159-179), Talos's machined starts a kubelet that exited again
// 5 s later, forever; so no error line of one attempt is final. It clears once the guest joined
// (its console says so, or the tenant approved its kubelet's CSR); a deadline failure names the
// last error line.
func consoleRefusal(p followed, v *machineView) *Suspect {
	c := v.Console
	if c == nil || c.Refused == "" || joinedByConsole(v) {
		return nil
	}
	return &Suspect{Class: verdict.JoinRejected, Stage: StageJoin, Object: "VirtualMachineInstance/" + v.vmName(), Since: c.RefusedAt,
		Detail: fmt.Sprintf("the serial console of VMI %s (launcher %s) shows %d failed join attempt(s), the last: %s (%s)",
			v.vmName(), c.Pod, c.Refusals, strings.TrimSpace(c.Refused), p.OS.ConsoleRetry)}
}

// identityFailure judges the identity of the Node VMI vm registered as. A Node named otherwise
// without a providerID waits for it when the family's worker sets it after registering (the
// Kairos provider's template patches it then), as a suspect; it is final when none can come:
// a family whose Node takes its VMI's name (CAPK patches only the Node of the KubevirtMachine's
// name, and the kubelet sets --provider-id only when it registers), or a Node that carries
// another providerID (the apiserver lets a set providerID change no more).
func identityFailure(p followed, v *machineView, n *corev1.Node) (*terminal, *Suspect) {
	m, vm := v.Machine, v.vmName()
	if p.OS.NodeNamedLikeVMI && n.Name != vm {
		how := "without a providerID"
		if n.Spec.ProviderID != "" {
			how = fmt.Sprintf("with providerID %q", n.Spec.ProviderID)
		}
		return &terminal{Class: verdict.Identity, Stage: StageProviderID,
			Detail: fmt.Sprintf("VMI %s registered as Node %s (InternalIP %s) %s; a %s worker's Node takes its VMI's name, and none other gets a providerID: the kubelet sets it only when it registers (--provider-id) and CAPK patches only the Node named like the VMI (%s)",
				vm, n.Name, internalIP(n), how, p.OS.Name, identityHint(p))}, nil
	}
	if n.Spec.ProviderID != "" && n.Spec.ProviderID != tenant.ProviderID(vm) {
		return &terminal{Class: verdict.Identity, Stage: StageProviderID,
			Detail: fmt.Sprintf("Node %s has providerID %q, not %s, and the apiserver lets a set providerID change no more", n.Name, n.Spec.ProviderID, tenant.ProviderID(vm))}, nil
	}
	// Cluster API sets a Machine's nodeRef once, from the Node of its providerID, and never
	// changes it (machine_controller_noderef.go:110-117).
	if ref := m.Status.NodeRef.Name; ref != "" && ref != n.Name {
		return &terminal{Class: verdict.Identity, Stage: StageNodeRef,
			Detail: fmt.Sprintf("Machine %s links Node %s, but its VMI %s is Node %s", m.Name, ref, vm, n.Name)}, nil
	}
	if wrong := wrongAnnotations(p, m, n); wrong != "" {
		// Cluster API writes its annotations onto the Node of the Machine's nodeRef on every
		// reconcile, replacing another value (sigs.k8s.io/cluster-api v1.13.6
		// internal/controllers/machine/machine_controller_noderef.go:121-143, 249-286).
		return nil, &Suspect{Class: verdict.Identity, Stage: StageNodeRef, Object: "Node/" + n.Name,
			Detail: fmt.Sprintf("Node %s: %s (Cluster API writes its own on each reconcile of Machine %s)", n.Name, wrong, m.Name)}
	}
	if n.Name != vm && n.Spec.ProviderID == "" {
		return nil, &Suspect{Class: verdict.Identity, Stage: StageProviderID, Object: "Node/" + n.Name, Since: n.CreationTimestamp.Time,
			Detail: fmt.Sprintf("VMI %s registered as Node %s (InternalIP %s) without a providerID; %s", vm, n.Name, internalIP(n), identityHint(p))}
	}
	return nil, nil
}

// machineStageGuess is where a Machine stands, for a failure that is not tied to a stage.
func machineStageGuess(p followed, v *machineView) Stage {
	if ms := progress(p, v); ms.index < doneIndex {
		return Stages()[ms.index]
	}
	return StageWorkloadPod
}

// nodeWanted says which Node the pool's family makes of VMI vm.
func nodeWanted(p followed, vm string) string {
	if p.OS.NodeNamedLikeVMI {
		return "a Node named " + vm
	}
	return "a Node with providerID " + tenant.ProviderID(vm)
}

// identityHint says where a family's worker takes its name and providerID from.
func identityHint(p followed) string {
	if p.OS.NodeNamedLikeVMI {
		return fmt.Sprintf("a %s worker's hostname is its VMI's, from KubeVirt's config drive, unless its machine configuration names one", p.OS.Name)
	}
	return fmt.Sprintf("a %s worker is named %s<id> and its provider patches the Node's providerID after the Node registers", p.OS.Name, p.OS.HostnamePrefix)
}
