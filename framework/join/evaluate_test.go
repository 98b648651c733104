package join

//lint:file-ignore SA1019 the tests set the v1beta1 failure fields and conditions providers at the v1beta1 contract write.

import (
	"fmt"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

func testPool(os string, replicas int) followed {
	return followed{Pool: Pool{Spec: lane.Pool{Name: "p", Class: os, Replicas: replicas}, Names: tenant.For("tenant-x", "t1").Pool("p"),
		OS: mustFamily(os)}, Console: true}
}

func mustFamily(name string) osfamily.Family {
	f, err := osfamily.Lookup(name)
	if err != nil {
		panic(err)
	}
	return f
}

// joined is a Machine whose every stage is passed, as the controllers leave it.
func joined(p followed, name string) *machineView {
	data := name + "-bootstrap"
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Names.Namespace}}
	m.Spec.Bootstrap.DataSecretName = &data
	m.Spec.Bootstrap.ConfigRef.Name = name
	m.Spec.InfrastructureRef.Name = name
	m.Status.NodeRef.Name = name
	m.Status.Phase = "Running"
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: tenant.DataVolume(name)}, Status: cdiv1.DataVolumeStatus{Phase: cdiv1.Succeeded, Progress: "100.0%"}}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	vmi.Status.Phase = kubevirtv1.Running
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{IP: "10.0.0.7"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
		tenant.AnnotationClusterName: p.Names.Cluster(), tenant.AnnotationClusterNamespace: p.Names.Namespace, tenant.AnnotationMachine: name}},
		Spec:   corev1.NodeSpec{ProviderID: tenant.ProviderID(name)},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	return &machineView{
		Machine: m, DataVolume: dv, VMI: vmi,
		Launcher: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-" + name + "-abcde"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		Console:  &consoleState{Pod: "virt-launcher-" + name + "-abcde", Lines: 3, Last: "This node has joined the cluster", Joined: true},
		Node:     node,
		Workload: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tenant.WorkloadPod(name)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}
}

func withTemplate(p followed, ms ...*machineView) *snapshot {
	t := unstructuredOf(p.OS.BootstrapTemplate)
	t.SetName(p.Names.BootstrapTemplate())
	return &snapshot{Pool: p, Template: t, Machines: ms}
}

// Each case takes a joined Machine back to one stage; the pool must be at that stage, not
// terminal, with a detail that says what it waits for.
func TestEachStageIsWhereTheFirstMissingPieceIs(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	for _, tc := range []struct {
		stage  Stage
		undo   func(v *machineView)
		detail string
	}{
		{StageBootstrapData, func(v *machineView) { v.Machine.Spec.Bootstrap.DataSecretName = nil }, "no bootstrap data"},
		{StageDiskImport, func(v *machineView) { v.DataVolume = nil }, "DataVolume m1-disk-system not created"},
		{StageDiskImport, func(v *machineView) {
			v.DataVolume.Status.Phase, v.DataVolume.Status.Progress = cdiv1.ImportInProgress, "42.0%"
		}, "ImportInProgress 42.0%"},
		{StageDiskImport, func(v *machineView) {
			v.DataVolume.Status.Phase = cdiv1.WaitForFirstConsumer
			v.VMI.Status.Phase, v.Temporary, v.Launcher = kubevirtv1.Pending, v.Launcher, nil
			v.Temporary.Status.Phase = corev1.PodPending
		}, "WaitForFirstConsumer: its claim binds once a consumer is placed; temporary launcher (binding its volume)"},
		{StageVMIRunning, func(v *machineView) { v.VMI.Status.Phase = kubevirtv1.Scheduling }, "VMI m1 Scheduling"},
		{StageGuestBoot, func(v *machineView) { v.Node, v.Console = nil, &consoleState{} }, "serial console is silent"},
		{StageJoin, func(v *machineView) { v.Node, v.Console.Joined = nil, false }, "talos prints no join on its console: waiting for its kubelet"},
		{StageNodeRegistered, func(v *machineView) {
			v.Node = nil
			v.CSRs = []certificatesv1.CertificateSigningRequest{{ObjectMeta: metav1.ObjectMeta{Name: "csr-1"}, Spec: certificatesv1.CertificateSigningRequestSpec{Username: "system:node:m1"},
				Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}}}}
		}, "no Node of it in the tenant yet (a Node named m1)"},
		{StageProviderID, func(v *machineView) { v.Node.Spec.ProviderID = "" }, "CAPK sets kubevirt://m1"},
		{StageNodeRef, func(v *machineView) { v.Machine.Status.NodeRef.Name = "" }, "no nodeRef"},
		{StageNodeRef, func(v *machineView) { delete(v.Node.Annotations, tenant.AnnotationClusterNamespace) }, "lacks cluster.x-k8s.io/cluster-namespace"},
		{StageReady, func(v *machineView) { v.Node.Status.Conditions[0].Status = corev1.ConditionFalse }, "not Ready"},
		{StageSchedulable, func(v *machineView) {
			v.Node.Spec.Taints = []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}
		}, "startup taint"},
		{StageSchedulable, func(v *machineView) { v.Node.Spec.Unschedulable = true }, "cordoned"},
		{StageWorkloadPod, func(v *machineView) { v.Workload = nil }, "not created yet"},
		{StageWorkloadPod, func(v *machineView) { v.Workload.Status.Phase = corev1.PodPending }, "Pending"},
		{StageWorkloadPod, func(v *machineView) {
			v.Workload.Status.Phase = corev1.PodPending
			v.WorkloadWarning = "; last warning FailedCreatePodSandBox: Failed to create pod sandbox: pull failed"
		}, "Pending; last warning FailedCreatePodSandBox: Failed to create pod sandbox: pull failed"},
	} {
		v := joined(p, "m1")
		tc.undo(v)
		out := evaluate(withTemplate(p, v))
		if out.Terminal != nil || out.Done || out.Stage != tc.stage || !strings.Contains(out.Detail, tc.detail) {
			t.Errorf("%s: got stage %s done %v terminal %+v detail %q; want %s with %q", tc.stage, out.Stage, out.Done, out.Terminal, out.Detail, tc.stage, tc.detail)
		}
	}
}

func TestAJoinedPoolIsDone(t *testing.T) {
	p := testPool(osfamily.Kairos, 2)
	s := withTemplate(p, joined(p, "m1"), joined(p, "m2"))
	s.KubeletConfig = kubeletConfig("clusterDNS:\n- 10.95.0.10\n")
	out := evaluate(s)
	if !out.Done || out.Terminal != nil {
		t.Fatalf("%+v", out)
	}
}

func TestMissingTemplateAndMachinesWait(t *testing.T) {
	p := testPool(osfamily.Talos, 2)
	out := evaluate(&snapshot{Pool: p})
	if out.Stage != StageBootstrapTemplate || !strings.Contains(out.Detail, "TalosConfigTemplate kubernetes-t1-p not rendered") {
		t.Errorf("no template: %+v", out)
	}
	out = evaluate(withTemplate(p, joined(p, "m1")))
	if out.Stage != StageBootstrapData || !strings.Contains(out.Detail, "1 of 2 Machines") {
		t.Errorf("one of two machines: %+v", out)
	}
}

func TestTheWrongTemplateKindIsTerminal(t *testing.T) {
	p := testPool(osfamily.Kairos, 1)
	other := unstructuredOf(mustFamily(osfamily.Talos).BootstrapTemplate)
	other.SetName(p.Names.BootstrapTemplate())
	out := evaluate(&snapshot{Pool: p, OtherTemplate: other})
	if out.Terminal == nil || out.Terminal.Class != verdict.ProductAssertion || !strings.Contains(out.Terminal.Detail, "not the KairosConfigTemplate") {
		t.Fatalf("%+v", out)
	}
}

// A stalled Machine that a health check is replacing does not hold the pool back once a
// replacement has joined: the pool needs its replicas, not every Machine ever made.
func TestAStalledExtraMachineDoesNotHoldThePool(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	stalled := joined(p, "m0")
	stalled.Node, stalled.Console = nil, &consoleState{}
	out := evaluate(withTemplate(p, stalled, joined(p, "m1")))
	if !out.Done {
		t.Fatalf("%+v", out)
	}
	out = evaluate(withTemplate(testPool(osfamily.Talos, 2), stalled, joined(p, "m1")))
	if out.Done || out.Stage != StageGuestBoot || !strings.Contains(out.Detail, "1 of 2 Machines past this stage") {
		t.Fatalf("%+v", out)
	}
}

// Machines at the same stage: the detail names the same one whatever order a cache lists them
// in, so the progress log does not flip between them.
func TestEqualMachinesGiveTheSameDetailInAnyOrder(t *testing.T) {
	p := testPool(osfamily.Talos, 2)
	a, b := joined(p, "m-a"), joined(p, "m-b")
	for _, v := range []*machineView{a, b} {
		v.Node, v.Workload, v.Console = nil, nil, &consoleState{}
	}
	one, other := evaluate(withTemplate(p, a, b)), evaluate(withTemplate(p, b, a))
	if one.Stage != StageGuestBoot || one.Detail != other.Detail {
		t.Fatalf("listed a, b: %s %q; listed b, a: %s %q", one.Stage, one.Detail, other.Stage, other.Detail)
	}
}

// Every terminal detector, with the class and stage the fault catalogue asks for.
func TestTerminalStatesEndTheJoinWithTheirClassAndStage(t *testing.T) {
	p := testPool(osfamily.Kairos, 1)
	for _, tc := range []struct {
		name   string
		class  verdict.Class
		stage  Stage
		detail string
		break_ func(v *machineView, s *snapshot)
	}{
		{"registry 401 in the Running condition", verdict.DiskImport, StageDiskImport, "refused by the registry", func(v *machineView, _ *snapshot) {
			v.DataVolume.Status.Phase = cdiv1.ImportInProgress
			v.DataVolume.Status.Conditions = []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "Error",
				Message: "Unable to process data: unexpected status code 401 Unauthorized"}}
		}},
		{"importer terminated with manifest unknown", verdict.DiskImport, StageDiskImport, "manifest unknown", func(v *machineView, _ *snapshot) {
			v.DataVolume.Status.Phase = cdiv1.ImportInProgress
			v.Importer = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "importer-x"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
				Name: "importer", RestartCount: 1, LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "manifest unknown: no such tag"}}}}}}
		}},
		{"launcher larger than any node", verdict.VMUnschedulable, StageVMIRunning, "Insufficient memory", func(v *machineView, _ *snapshot) {
			v.VMI.Status.Phase = kubevirtv1.Scheduling
			unplaceableLauncher(v, v.Launcher, "64Gi")
		}},
		{"crash loop", verdict.VMFailed, StageVMIRunning, "CrashLoopBackOff", func(v *machineView, _ *snapshot) {
			v.VMI = nil
			v.VM = crashLooping(v.vmName(), crashLoopLimit)
		}},
		{"failed VMI that nothing restarts", verdict.VMFailed, StageVMIRunning, "runStrategy Manual does not start it again", func(v *machineView, _ *snapshot) {
			v.VMI.Status.Phase = kubevirtv1.Failed
			v.VM = vmWith(v.vmName(), kubevirtv1.RunStrategyManual)
		}},
		{"succeeded VMI that nothing restarts", verdict.VMFailed, StageVMIRunning, "VMI m1 Succeeded, and VirtualMachine m1 with runStrategy Once does not start it again", func(v *machineView, _ *snapshot) {
			v.VMI.Status.Phase = kubevirtv1.Succeeded
			v.VM = vmWith(v.vmName(), kubevirtv1.RunStrategyOnce)
		}},
		{"temporary launcher of a volume waiting for its consumer larger than any node", verdict.VMUnschedulable, StageVMIRunning, "Insufficient memory", func(v *machineView, _ *snapshot) {
			v.VMI.Status.Phase = kubevirtv1.Pending
			v.Temporary, v.Launcher = v.Launcher, nil
			unplaceableLauncher(v, v.Temporary, "64Gi")
		}},
		{"foreign providerID", verdict.Identity, StageProviderID, "aws://", func(v *machineView, _ *snapshot) {
			v.Node.Spec.ProviderID = "aws:///i-1"
		}},
		{"lasting NoSchedule taint", verdict.NotSchedulable, StageSchedulable, "e2e.example/broken=yes:NoSchedule", func(v *machineView, _ *snapshot) {
			v.Node.Spec.Taints = []corev1.Taint{{Key: "e2e.example/broken", Value: "yes", Effect: corev1.TaintEffectNoSchedule}}
			v.Workload = nil
		}},
		{"kubelet-config without clusterDNS", verdict.ClusterDNS, StageJoin, "carries no clusterDNS", func(v *machineView, s *snapshot) {
			v.Node = nil
			s.KubeletConfig = kubeletConfig("cgroupDriver: systemd\n")
		}},
		{"kubelet-config clusterDNS not the CoreDNS Service's", verdict.ClusterDNS, StageJoin, "sets clusterDNS [10.95.0.53], but the tenant CoreDNS Service kube-system/kube-dns is at 10.95.0.10", func(v *machineView, s *snapshot) {
			v.Node = nil
			s.KubeletConfig = kubeletConfig("clusterDNS: [10.95.0.53]\n")
		}},
	} {
		v := joined(p, "m1")
		s := withTemplate(p, v)
		s.KubeletConfig = kubeletConfig("clusterDNS: [10.95.0.10]\n")
		s.ClusterDNSService = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}, Spec: corev1.ServiceSpec{ClusterIP: "10.95.0.10"}}
		tc.break_(v, s)
		out := evaluate(s)
		if out.Terminal == nil {
			t.Errorf("%s: not terminal: %+v", tc.name, out)
			continue
		}
		if out.Terminal.Class != tc.class || out.Terminal.Stage != tc.stage || !strings.Contains(out.Terminal.Detail, tc.detail) {
			t.Errorf("%s: got %s at %s: %q; want %s at %s with %q", tc.name, out.Terminal.Class, out.Terminal.Stage, out.Terminal.Detail, tc.class, tc.stage, tc.detail)
		}
	}
}

// Talos workers do not join with kubeadm: their pools do not depend on the kubelet-config.
func TestClusterDNSIsRequiredOfKubeadmPoolsOnly(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	s := withTemplate(p, joined(p, "m1"))
	s.KubeletConfig = kubeletConfig("cgroupDriver: systemd\n")
	if out := evaluate(s); !out.Done {
		t.Fatalf("%+v", out)
	}
}

func TestStartupTaintsAndTransientImporterErrorsAreNotTerminal(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	v := joined(p, "m1")
	v.Node.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}
	if out := evaluate(withTemplate(p, v)); out.Terminal != nil {
		t.Errorf("startup taint: %+v", out.Terminal)
	}
	v = joined(p, "m1")
	v.DataVolume.Status.Phase = cdiv1.ImportInProgress
	v.DataVolume.Status.Conditions = []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "Error",
		Message: "Unable to connect to http data source: expected status code 200, got 503"}}
	if out := evaluate(withTemplate(p, v)); out.Terminal != nil || out.Stage != StageDiskImport {
		t.Errorf("503: %+v", out)
	}
}

func kubeletConfig(body string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.KubeletConfigNamespace, Name: tenant.KubeletConfigName},
		Data: map[string]string{tenant.KubeletConfigKey: body}}
}

func failedObject(gvk interface{ String() string }, reason, msg string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"failureReason": reason, "failureMessage": msg}}}
	switch gvk.String() {
	case tenant.KubevirtMachineGVK.String():
		u.SetGroupVersionKind(tenant.KubevirtMachineGVK)
	default:
		u.SetGroupVersionKind(mustFamily(osfamily.Kairos).BootstrapConfig)
	}
	u.SetName("m1")
	return u
}

// A MachineSet that cannot clone its bootstrap template (a provider's webhook refused the config)
// fails the pool at once as a bootstrap failure; a preflight check that holds it is waited out.
func TestARefusedCloneFailsThePoolAtOnce(t *testing.T) {
	p := testPool(osfamily.Kairos, 1)
	ms := clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "ms-1"}, Status: clusterv1.MachineSetStatus{Deprecated: &clusterv1.MachineSetDeprecatedStatus{
		V1Beta1: &clusterv1.MachineSetV1Beta1DeprecatedStatus{Conditions: clusterv1.Conditions{{Type: clusterv1.MachinesCreatedV1Beta1Condition,
			Status: corev1.ConditionFalse, Reason: clusterv1.BootstrapTemplateCloningFailedV1Beta1Reason,
			Message: `admission webhook "vkairosconfig.kb.io" denied the request: KairosConfig.bootstrap.cluster.x-k8s.io "x" is invalid`}}}}}}
	s := withTemplate(p)
	s.MachineSets = []clusterv1.MachineSet{ms}
	out := evaluate(s)
	if out.Terminal == nil || out.Terminal.Class != verdict.Bootstrap || out.Stage != StageBootstrapData || !strings.Contains(out.Terminal.Detail, "vkairosconfig.kb.io") {
		t.Fatalf("%+v %+v", out, out.Terminal)
	}
	s.MachineSets[0].Status.Deprecated.V1Beta1.Conditions[0].Reason = clusterv1.PreflightCheckFailedV1Beta1Reason
	if out := evaluate(s); out.Terminal != nil || out.Stage != StageBootstrapData {
		t.Fatalf("a preflight check: %+v %+v", out, out.Terminal)
	}
}

// Every watched change re-evaluates every pool; this is the cost of one evaluation of a pool
// of 10 joined workers.
func BenchmarkEvaluatePoolOf10(b *testing.B) {
	p := testPool(osfamily.Kairos, 10)
	var ms []*machineView
	for i := 0; i < 10; i++ {
		ms = append(ms, joined(p, fmt.Sprintf("m%d", i)))
	}
	s := withTemplate(p, ms...)
	s.KubeletConfig = kubeletConfig("clusterDNS: [10.95.0.10]\n")
	b.ReportAllocs()
	for b.Loop() {
		if out := evaluate(s); !out.Done {
			b.Fatal(out)
		}
	}
}

// An importer CDI and the kubelet keep retrying is a suspect, never a verdict: restarts for a
// reason that is not a registry's refusal, an OOM kill (CDI replaces the Pod with direct I/O).
// It is a suspect of the pool, so a deadline failure carries it as its reason.
func TestRetriedImporterIsASuspect(t *testing.T) {
	for name, last := range map[string]corev1.ContainerStateTerminated{
		"crashing": {ExitCode: 1, Reason: "Error", Message: "Unable to process data: unexpected EOF"},
		"oom":      {ExitCode: 137, Reason: "OOMKilled"},
	} {
		dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "m1-disk-system"}, Status: cdiv1.DataVolumeStatus{Phase: cdiv1.ImportInProgress, Progress: "N/A"}}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "importer-x"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "importer", RestartCount: 5, LastTerminationState: corev1.ContainerState{Terminated: &last}}}}}
		if term := diskFailure(dv, pod); term != nil {
			t.Errorf("%s: %+v is a verdict; CDI retries it", name, term)
		}
		s := importerSuspect(dv, pod)
		if s == nil || s.Class != verdict.DiskImport || s.Stage != StageDiskImport || !strings.Contains(s.Detail, "last exit") || !strings.Contains(s.Detail, last.Reason) {
			t.Errorf("%s: suspect %+v does not name the importer's exit %s", name, s, last.Reason)
		}
		dv.Status.Phase = cdiv1.Succeeded
		if s := importerSuspect(dv, pod); s != nil {
			t.Errorf("%s: a suspect once the import succeeded: %+v", name, s)
		}
	}
}
