package join

import (
	"fmt"
	"sort"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// machineView is one Machine of the pool and everything that hangs off it, as last read.
type machineView struct {
	Machine         *clusterv1.Machine
	KubevirtMachine *unstructured.Unstructured
	BootstrapConfig *unstructured.Unstructured
	DataVolume      *cdiv1.DataVolume
	Importer        *corev1.Pod
	// VM is the KubevirtMachine's VirtualMachine; VMI its current instance (the VM's name:
	// a VMI the VM controller replaced is the new one).
	VM       *kubevirtv1.VirtualMachine
	VMI      *kubevirtv1.VirtualMachineInstance
	Launcher *corev1.Pod
	// Temporary is the launcher KubeVirt starts only to bind a volume waiting for its first
	// consumer (annotation kubevirt.io/ephemeral-provisioning).
	Temporary *corev1.Pod
	Console   *consoleState
	// Node is the tenant Node this VMI registered as: the one named like it, or failing that
	// the one whose InternalIP is the VMI's address.
	Node     *corev1.Node
	CSRs     []certificatesv1.CertificateSigningRequest
	Workload *corev1.Pod
	// WorkloadWarning is the last Warning event of a workload pod not yet Running ("": none),
	// such as the kubelet's FailedCreatePodSandBox, whose cause no pod status carries.
	WorkloadWarning string
	// ManagementNodes are the management cluster's Nodes, where launchers are placed.
	ManagementNodes []corev1.Node
}

// vmName is the KubevirtMachine's, VM's and VMI's name.
func (v *machineView) vmName() string {
	if n := v.Machine.Spec.InfrastructureRef.Name; n != "" {
		return n
	}
	return v.Machine.Name
}

// snapshot is the pool as last read from the management and tenant clusters.
type snapshot struct {
	Pool followed
	// Template is the pool's bootstrap template of the kind its class calls for; Other is a
	// template of the same name and the other kind.
	Template, OtherTemplate *unstructured.Unstructured
	MachineDeployment       *clusterv1.MachineDeployment
	MachineSets             []clusterv1.MachineSet
	Machines                []*machineView
	// KubeletConfig is the tenant kube-system/kubelet-config ConfigMap (nil: not there yet).
	KubeletConfig *corev1.ConfigMap
	// ClusterDNSService is the tenant kube-system/kube-dns Service (nil: not there yet).
	ClusterDNSService *corev1.Service
}

// outcome is one evaluation of the pool.
type outcome struct {
	Stage    Stage
	Detail   string
	Done     bool
	Terminal *terminal
	// Suspects are the states that would fail the pool were they final (Suspect).
	Suspects []Suspect
	// NeedPod are the Nodes that reached the workload stage and have no workload Pod yet.
	NeedPod []string
}

// doneIndex stands for "every stage passed" in stage arithmetic.
var doneIndex = len(Stages())

// machineStage is how far one Machine got, where it waits, and whether it can go on.
type machineStage struct {
	name     string
	index    int // Stage index, doneIndex when done
	detail   string
	term     *terminal
	suspects []Suspect
}

func evaluate(s *snapshot) outcome {
	p := s.Pool
	tmplKind := p.OS.BootstrapTemplate.Kind
	if s.Template == nil {
		if s.OtherTemplate != nil {
			return outcome{Stage: StageBootstrapTemplate, Terminal: &terminal{Class: verdict.ProductAssertion, Stage: StageBootstrapTemplate,
				Detail: fmt.Sprintf("pool on class %s (os %s) has a %s %s, not the %s its class calls for",
					p.Spec.Class, p.OS.Name, s.OtherTemplate.GetKind(), s.OtherTemplate.GetName(), tmplKind)}}
		}
		return outcome{Stage: StageBootstrapTemplate,
			Detail: fmt.Sprintf("%s %s not rendered yet (the platform's reconcile Job writes it)", tmplKind, p.Names.BootstrapTemplate())}
	}
	if t := clusterDNSFailure(s); t != nil {
		return outcome{Stage: t.Stage, Terminal: t}
	}
	out := outcome{}
	if len(s.Machines) < p.Spec.Replicas {
		t, suspects := machineSetFailure(s.MachineSets)
		if t != nil {
			return outcome{Stage: t.Stage, Terminal: t}
		}
		out.Suspects = suspects
	}
	var stages []machineStage
	for _, m := range s.Machines {
		ms := evaluateMachine(p, m)
		ms.name = m.Machine.Name
		if ms.term != nil {
			return outcome{Stage: ms.term.Stage, Terminal: ms.term, Suspects: append(out.Suspects, ms.suspects...)}
		}
		out.Suspects = append(out.Suspects, ms.suspects...)
		stages = append(stages, ms)
		if m.Node != nil && m.Workload == nil && ms.index == StageWorkloadPod.Index() {
			out.NeedPod = append(out.NeedPod, m.Node.Name)
		}
	}
	// Furthest first; among equals by name, so that from one look to the next the detail names
	// the same Machine (a cache lists in no set order) and the progress log does not flip.
	sort.Slice(stages, func(i, j int) bool {
		if stages[i].index != stages[j].index {
			return stages[i].index > stages[j].index
		}
		return stages[i].name < stages[j].name
	})
	// The pool is as far as the least advanced of its best `replicas` Machines: a stalled
	// Machine that a health check is replacing does not hold the pool back once its
	// replacement overtakes it.
	if len(stages) < p.Spec.Replicas {
		out.Stage = StageBootstrapData
		out.Detail = fmt.Sprintf("%d of %d Machines (%s)", len(stages), p.Spec.Replicas, mdDetail(s.MachineDeployment, p))
		return out
	}
	worst := stages[p.Spec.Replicas-1]
	if p.Spec.Replicas == 0 || worst.index == doneIndex {
		out.Done, out.Stage = true, StageWorkloadPod
		out.Detail = fmt.Sprintf("%d of %d Nodes run a workload pod", countDone(stages), p.Spec.Replicas)
		return out
	}
	out.Stage = Stages()[worst.index]
	out.Detail = worst.detail
	if n := countAtLeast(stages, worst.index+1); n > 0 {
		out.Detail += fmt.Sprintf(" (%d of %d Machines past this stage)", n, p.Spec.Replicas)
	}
	return out
}

func countDone(ms []machineStage) int { return countAtLeast(ms, doneIndex) }

func countAtLeast(ms []machineStage, idx int) int {
	n := 0
	for _, m := range ms {
		if m.index >= idx {
			n++
		}
	}
	return n
}

func mdDetail(md *clusterv1.MachineDeployment, p followed) string {
	if md == nil {
		return fmt.Sprintf("MachineDeployment %s not rendered yet", p.Names.MachineDeployment())
	}
	want := "unset"
	if md.Spec.Replicas != nil {
		want = fmt.Sprint(*md.Spec.Replicas)
	}
	d := fmt.Sprintf("MachineDeployment %s wants %s", md.Name, want)
	// Cluster API says why it creates no MachineSet: a bootstrap or infrastructure template it
	// did not find ("Scaling up from 0 to 1 replicas is blocked because KairosConfigTemplate does
	// not exist", sigs.k8s.io/cluster-api v1.13.6 internal/controllers/machinedeployment/
	// machinedeployment_status.go:276-279, missingReferencesMessage). Its word is from its
	// last pass: it watches no template and retries with its back-off once one appears.
	for _, c := range md.Status.Conditions {
		if c.Type == clusterv1.MachineDeploymentScalingUpCondition && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, " is blocked ") {
			d += fmt.Sprintf("; %s: %s (at its pass of generation %d)", c.Type, c.Message, c.ObservedGeneration)
		}
	}
	return d
}

// evaluateMachine is where one Machine is. The detectors run first: a terminal state wins
// over "still waiting"; a suspect is kept beside where the Machine waits.
func evaluateMachine(p followed, v *machineView) machineStage {
	t, suspects := detectMachine(p, v)
	if t != nil {
		return machineStage{index: t.Stage.Index(), term: t, suspects: suspects}
	}
	ms := progress(p, v)
	ms.suspects = suspects
	return ms
}

// progress is the first stage one Machine has not passed, and what it waits for there.
func progress(p followed, v *machineView) machineStage {
	m := v.Machine
	vm := v.vmName()
	at := func(s Stage, format string, a ...any) machineStage {
		return machineStage{index: s.Index(), detail: fmt.Sprintf("Machine %s: ", m.Name) + fmt.Sprintf(format, a...)}
	}
	if m.Spec.Bootstrap.DataSecretName == nil || *m.Spec.Bootstrap.DataSecretName == "" {
		return at(StageBootstrapData, "no bootstrap data yet (%s %s: %s)", p.OS.BootstrapConfig.Kind,
			orWord(m.Spec.Bootstrap.ConfigRef.Name, "not created"), conditionsOf(v.BootstrapConfig))
	}
	dvName := tenant.DataVolume(vm)
	if v.DataVolume == nil {
		return at(StageDiskImport, "DataVolume %s not created yet (KubevirtMachine %s: %s)", dvName, vm, conditionsOf(v.KubevirtMachine))
	}
	if ph := v.DataVolume.Status.Phase; ph == cdiv1.WaitForFirstConsumer || ph == cdiv1.PendingPopulation {
		// The claim binds when a pod using it is placed: KubeVirt's temporary launcher
		// (CDI v1.64.0 pkg/controller/datavolume/controller-base.go:998,1010).
		return at(StageDiskImport, "DataVolume %s %s: its claim binds once a consumer is placed%s", dvName, ph, launcherDetail(nil, v.Temporary))
	}
	if v.DataVolume.Status.Phase != cdiv1.Succeeded {
		return at(StageDiskImport, "DataVolume %s %s %s%s", dvName, orWord(string(v.DataVolume.Status.Phase), "(no phase)"),
			v.DataVolume.Status.Progress, importerDetail(v.Importer))
	}
	if v.VMI == nil || v.VMI.Status.Phase != kubevirtv1.Running {
		phase := "not created yet"
		if v.VMI != nil {
			phase = orWord(string(v.VMI.Status.Phase), "(no phase)")
		}
		return at(StageVMIRunning, "VMI %s %s%s", vm, phase, launcherDetail(v.Launcher, v.Temporary))
	}
	if v.Node == nil {
		// A kubelet CSR of the VMI shows the guest booted whatever its console said; a console
		// another client took before the guest said anything shows nothing, so the boot is
		// judged from the tenant from then on.
		silent := v.Console == nil || v.Console.Lines == 0
		if p.Console && silent && len(v.CSRs) == 0 && (v.Console == nil || v.Console.Lost == "") {
			return at(StageGuestBoot, "VMI %s runs; its serial console is silent%s", vm, consoleErr(v.Console))
		}
		if p.OS.ConsoleJoined == nil && !csrApproved(v) {
			return at(StageJoin, "VMI %s %s%s; %s prints no join on its console: waiting for its kubelet%s", vm, booted(v), lastLine(v.Console), p.OS.Name, csrDetail(v.CSRs))
		}
		if !joinedByConsole(v) {
			return at(StageJoin, "VMI %s %s; waiting for the join%s%s", vm, booted(v), lastLine(v.Console), csrDetail(v.CSRs))
		}
		return at(StageNodeRegistered, "VMI %s joined; no Node of it in the tenant yet (%s)%s", vm, nodeWanted(p, vm), csrDetail(v.CSRs))
	}
	n := v.Node
	if n.Spec.ProviderID != tenant.ProviderID(vm) {
		if n.Name != vm {
			return at(StageProviderID, "Node %s has no providerID yet; the %s provider patches %s onto it after it registers", n.Name, p.OS.Name, tenant.ProviderID(vm))
		}
		return at(StageProviderID, "Node %s has providerID %q; CAPK sets %s on the Node named like the VMI", n.Name, n.Spec.ProviderID, tenant.ProviderID(vm))
	}
	if m.Status.NodeRef.Name == "" {
		return at(StageNodeRef, "no nodeRef yet (Cluster API links Node %s through the cluster's kubeconfig Secret)", n.Name)
	}
	if missing := missingAnnotations(p, m, n); missing != "" {
		return at(StageNodeRef, "Node %s lacks %s", n.Name, missing)
	}
	if wrong := wrongAnnotations(p, m, n); wrong != "" {
		return at(StageNodeRef, "Node %s: %s; Cluster API writes its own on its next reconcile", n.Name, wrong)
	}
	if ok, why := nodeReady(n); !ok {
		return at(StageReady, "Node %s not Ready: %s", n.Name, why)
	}
	if why := unschedulable(n); why != "" {
		return at(StageSchedulable, "Node %s: %s", n.Name, why)
	}
	if v.Workload == nil {
		return at(StageWorkloadPod, "workload pod for Node %s not created yet", n.Name)
	}
	if v.Workload.Status.Phase != corev1.PodRunning {
		return at(StageWorkloadPod, "workload pod %s/%s %s%s%s", v.Workload.Namespace, v.Workload.Name,
			orWord(string(v.Workload.Status.Phase), "(no phase)"), podWaiting(v.Workload), v.WorkloadWarning)
	}
	return machineStage{index: doneIndex, detail: fmt.Sprintf("Machine %s: workload pod runs on Node %s", m.Name, n.Name)}
}

// joinedByConsole reports whether the guest said it joined on its console, or the tenant
// approved its kubelet's CSR.
func joinedByConsole(v *machineView) bool {
	return (v.Console != nil && v.Console.Joined) || csrApproved(v)
}

func csrApproved(v *machineView) bool {
	for _, csr := range v.CSRs {
		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved {
				return true
			}
		}
	}
	return false
}
