package join_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/sim/world"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// The management cluster of these tests is the sim's world: a real apiserver with every
// fixture CRD, the real scheduler placing launcher pods on kwok's Nodes, kwok running them and
// serving their logs. The tests write the other objects the way their controllers would
// (Cluster API, CAPK, CDI, KubeVirt, the guest); the tenant cluster is the same apiserver,
// its Node played by kwok too.
func TestJoin(t *testing.T) {
	tools := cptest.Tools(t)
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	w, err := world.Start(ctx, world.Options{Tools: tools, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	t.Run("EveryStageInOrderToARunningWorkloadPod", func(t *testing.T) { testEveryStage(t, w) })
	t.Run("TerminalStatesEndTheJoinAtOnce", func(t *testing.T) { testTerminalStates(t, w) })
	t.Run("TheDeadlineNamesTheStageAndWhatIsMissing", func(t *testing.T) { testDeadline(t, w) })
}

// scene is one pool's objects in a namespace of its own.
type scene struct {
	t    *testing.T
	ctx  context.Context
	w    *world.World
	c    client.Client
	pool join.Pool
	n    int // objects made, for unique IPs
}

var sceneCount struct {
	sync.Mutex
	n int
}

func newScene(t *testing.T, w *world.World, os string, replicas int) *scene {
	t.Helper()
	sceneCount.Lock()
	sceneCount.n++
	i := sceneCount.n
	sceneCount.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := fmt.Sprintf("tenant-join%d", i)
	s := &scene{t: t, ctx: ctx, w: w, c: w.Cluster.Client, n: i * 16,
		pool: join.Pool{Names: tenant.For(ns, fmt.Sprintf("j%d", i)).Pool("p"), Class: os, OS: os, Replicas: replicas,
			Console: true, WorkloadImage: "docker.io/library/nginx@sha256:" + strings.Repeat("4", 64)}}
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	s.poll("the default ServiceAccount of "+ns, func() bool {
		var sa corev1.ServiceAccount
		return s.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, &sa) == nil
	})
	return s
}

func (s *scene) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// poll is the test's own wait for a state it does not control (kwok, the scheduler).
func (s *scene) poll(what string, ok func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			s.t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *scene) ns() string { return s.pool.Names.Namespace }

// template is the pool's bootstrap template, as the reconcile Job applies it.
func (s *scene) template() {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{}}}}}
	u.SetGroupVersionKind(tenant.BootstrapTemplateGVK(s.pool.OS))
	if s.pool.OS == tenant.OSKairos {
		u.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"kubernetesVersion": "v1.35.4", "role": "worker"}}}
	} else {
		u.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"generateType": "none"}}}
	}
	u.SetNamespace(s.ns())
	u.SetName(s.pool.Names.BootstrapTemplate())
	s.must(s.c.Create(s.ctx, u))
}

// machine is a Machine the MachineSet made, its KubevirtMachine and bootstrap config not yet
// ready; vm is its (and its KubevirtMachine's, VM's and VMI's) name.
func (s *scene) machine(suffix string) string {
	name := s.pool.Names.MachineDeployment() + "-5c7d9-" + suffix
	boot := tenant.BootstrapConfigGVK(s.pool.OS)
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns(), Name: name, Labels: s.pool.Names.Selector()},
		Spec: clusterv1.MachineSpec{
			ClusterName: s.pool.Names.Cluster(),
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: boot.Group, Kind: boot.Kind, Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: tenant.KubevirtMachineGVK.Group,
				Kind: tenant.KubevirtMachineGVK.Kind, Name: name},
		},
	}
	s.must(s.c.Create(s.ctx, m))
	cfg := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"generateType": "none"}}}
	if s.pool.OS == tenant.OSKairos {
		cfg.Object["spec"] = map[string]any{"kubernetesVersion": "v1.35.4"}
	}
	cfg.SetGroupVersionKind(boot)
	cfg.SetNamespace(s.ns())
	cfg.SetName(name)
	s.must(s.c.Create(s.ctx, cfg))
	kvm := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	kvm.SetGroupVersionKind(tenant.KubevirtMachineGVK)
	kvm.SetNamespace(s.ns())
	kvm.SetName(name)
	s.must(s.c.Create(s.ctx, kvm))
	return name
}

// bootstrapData is the bootstrap provider's Secret reaching the Machine.
func (s *scene) bootstrapData(vm string) {
	var m clusterv1.Machine
	s.must(s.c.Get(s.ctx, types.NamespacedName{Namespace: s.ns(), Name: vm}, &m))
	data := vm + "-bootstrap"
	m.Spec.Bootstrap.DataSecretName = &data
	s.must(s.c.Update(s.ctx, &m))
}

// failStatus sets status.failureReason/failureMessage on a provider object.
func (s *scene) failStatus(gvk interface{ String() string }, kind, vm, reason, msg string) {
	u := &unstructured.Unstructured{}
	switch kind {
	case "KubevirtMachine":
		u.SetGroupVersionKind(tenant.KubevirtMachineGVK)
	default:
		u.SetGroupVersionKind(tenant.BootstrapConfigGVK(s.pool.OS))
	}
	s.must(s.c.Get(s.ctx, types.NamespacedName{Namespace: s.ns(), Name: vm}, u))
	u.Object["status"] = map[string]any{"failureReason": reason, "failureMessage": msg}
	s.must(s.c.Status().Update(s.ctx, u))
}

// dataVolume is CAPK's DataVolume of vm, with CDI's status.
func (s *scene) dataVolume(vm string, phase cdiv1.DataVolumePhase, progress string, conds ...cdiv1.DataVolumeCondition) {
	key := types.NamespacedName{Namespace: s.ns(), Name: tenant.DataVolume(vm)}
	var dv cdiv1.DataVolume
	if err := s.c.Get(s.ctx, key, &dv); err != nil {
		dv = cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: ptr("docker://example.invalid/kairos@sha256:" + strings.Repeat("0", 64))}},
				Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}}}}}
		s.must(s.c.Create(s.ctx, &dv))
	}
	dv.Status = cdiv1.DataVolumeStatus{Phase: phase, Progress: cdiv1.DataVolumeProgress(progress), Conditions: conds}
	s.must(s.c.Status().Update(s.ctx, &dv))
}

// vmi is KubeVirt's VMI of vm in phase, on the pod network address ip.
func (s *scene) vmi(vm string, phase kubevirtv1.VirtualMachineInstancePhase, ip string) {
	key := types.NamespacedName{Namespace: s.ns(), Name: vm}
	var v kubevirtv1.VirtualMachineInstance
	if err := s.c.Get(s.ctx, key, &v); err != nil {
		v = kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{}}}}
		s.must(s.c.Create(s.ctx, &v))
	}
	v.Status.Phase = phase
	v.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: ip, IPs: []string{ip}}}
	s.must(s.c.Status().Update(s.ctx, &v))
}

// launcher is KubeVirt's virt-launcher Pod of vm (compute and guest-console-log), asking for
// memory; the real scheduler places it and kwok runs it.
func (s *scene) launcher(vm, memory string) string {
	name := tenant.LauncherPrefix + vm + "-x7k2p"
	for _, ct := range []string{"compute", join.ConsoleContainer} {
		_, err := s.w.ContainerLog(s.ns(), name, ct)
		s.must(err)
	}
	s.must(s.c.Create(s.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns(), Name: name, Labels: map[string]string{tenant.LabelVMName: vm, "kubevirt.io": "virt-launcher"}},
		Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{
				{Name: "compute", Image: "virt-launcher", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}}},
				{Name: join.ConsoleContainer, Image: "virt-launcher"},
			}},
	}))
	return name
}

// console appends lines to the serial console of launcher pod.
func (s *scene) console(pod string, lines ...string) {
	path, err := s.w.ContainerLog(s.ns(), pod, join.ConsoleContainer)
	s.must(err)
	s.must(simenv.WriteContainerLog(path, time.Now(), lines...))
}

// node is the guest's kubelet registering Node name at InternalIP ip; kwok plays its kubelet.
func (s *scene) node(name, ip string, taints ...corev1.Taint) {
	s.must(s.c.Create(s.ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{world.KwokNodeAnnotation: "fake"}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "v1.35.4"},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}))
}

// withClusterDNS is Kamaji's kubelet-config of a control plane with dnsServiceIPs.
const withClusterDNS = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n- 10.95.0.10\n"

// kubeletConfig is Kamaji writing the tenant's kube-system/kubelet-config.
func (s *scene) kubeletConfig(body string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.KubeletConfigNamespace, Name: tenant.KubeletConfigName}}
	s.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := s.c.Get(s.ctx, client.ObjectKeyFromObject(cm), cm)
		cm.Data = map[string]string{tenant.KubeletConfigKey: body}
		if err != nil {
			return s.c.Create(s.ctx, cm)
		}
		return s.c.Update(s.ctx, cm)
	}))
}

// providerID is CAPK patching the Node of the VMI's name.
func (s *scene) providerID(node, id string) {
	s.updateNode(node, func(n *corev1.Node) { n.Spec.ProviderID = id })
}

// updateNode changes Node name as a controller does: read, change, write, again on a conflict
// (kwok writes the Node's status all along).
func (s *scene) updateNode(name string, change func(*corev1.Node)) {
	s.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var n corev1.Node
		if err := s.c.Get(s.ctx, types.NamespacedName{Name: name}, &n); err != nil {
			return err
		}
		change(&n)
		return s.c.Update(s.ctx, &n)
	}))
}

// link is the Machine controller: nodeRef on the Machine, its annotations on the Node.
func (s *scene) link(vm, node string) {
	var m clusterv1.Machine
	s.must(s.c.Get(s.ctx, types.NamespacedName{Namespace: s.ns(), Name: vm}, &m))
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	s.must(s.c.Status().Update(s.ctx, &m))
	s.updateNode(node, func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[tenant.AnnotationClusterName] = s.pool.Names.Cluster()
		n.Annotations[tenant.AnnotationClusterNamespace] = s.ns()
		n.Annotations[tenant.AnnotationMachine] = vm
	})
}

func (s *scene) ip() string {
	s.n++
	return fmt.Sprintf("10.77.%d.%d", s.n/200, s.n%200+10)
}

// joinRun is Join running in the background.
type joinRun struct {
	w    *join.Watcher
	log  *syncBuffer
	done chan struct{}
	res  *join.Result
	err  error
	at   time.Time
	cl   *budget.Clock
}

// start starts a Watcher and Join for the scene's pool, inside budget.
func (s *scene) start(budgetFor time.Duration) *joinRun {
	s.t.Helper()
	cl := budget.New(lane.Budget{JobCap: lane.Duration(time.Hour), Phases: []lane.Phase{{Name: "pools", Ceiling: lane.Duration(budgetFor)}}}, budget.Options{})
	pctx, span, err := cl.Phase(s.ctx, "pools")
	s.must(err)
	s.t.Cleanup(func() { span.End(nil) })
	r := &joinRun{log: &syncBuffer{}, done: make(chan struct{}), cl: cl}
	r.w, err = join.Start(s.ctx, join.Options{Management: s.w.Cluster, Tenant: s.w.Cluster, Namespace: s.ns(),
		OSes: []string{s.pool.OS}, Clock: cl, Log: r.log})
	s.must(err)
	s.t.Cleanup(r.w.Close)
	go func() {
		defer close(r.done)
		r.res, r.err = r.w.Join(pctx, s.pool)
		r.at = time.Now()
	}()
	return r
}

// at waits until the pool's reported stage is st.
func (s *scene) at(r *joinRun, st join.Stage) {
	s.t.Helper()
	s.poll("pool at stage "+string(st), func() bool {
		select {
		case <-r.done:
			s.t.Fatalf("the join ended (%v) before stage %s", r.err, st)
		default:
		}
		p, ok := r.w.Progress(s.pool.Names.Pool)
		return ok && p.Stage == st
	})
}

func (r *joinRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the join did not end; its log:\n%s", r.log)
	}
}

func testEveryStage(t *testing.T, w *world.World) {
	s := newScene(t, w, tenant.OSKairos, 1)
	r := s.start(2 * time.Minute)
	s.at(r, join.StageBootstrapTemplate)
	s.template()
	s.at(r, join.StageBootstrapData)
	vm := s.machine("aaaaa")
	s.bootstrapData(vm)
	s.at(r, join.StageDiskImport)
	s.dataVolume(vm, cdiv1.ImportInProgress, "42.0%")
	s.dataVolume(vm, cdiv1.Succeeded, "100.0%")
	s.at(r, join.StageVMIRunning)
	ip := s.ip()
	s.vmi(vm, kubevirtv1.Scheduled, ip)
	pod := s.launcher(vm, "1Gi")
	s.vmi(vm, kubevirtv1.Running, ip)
	s.at(r, join.StageGuestBoot)
	s.console(pod, "[    0.000000] Linux version 6.12.0 (kairos)")
	s.at(r, join.StageJoin)
	s.kubeletConfig(withClusterDNS)
	s.console(pod, "This node has joined the cluster:")
	s.at(r, join.StageNodeRegistered)
	s.node(vm, ip)
	s.at(r, join.StageProviderID)
	s.providerID(vm, tenant.ProviderID(vm))
	s.at(r, join.StageNodeRef)
	s.link(vm, vm)
	// kwok reports the Node Ready, no taint holds it, the join creates the workload pod and
	// kwok runs it: the join ends.
	r.wait(t)
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.log)
	}
	if len(r.res.Workers) != 1 || r.res.Workers[0] != (join.Worker{Machine: vm, VMI: vm, Node: vm, WorkloadPod: tenant.WorkloadPod(vm)}) {
		t.Fatalf("result %+v", r.res)
	}
	var pod2 corev1.Pod
	s.must(s.c.Get(s.ctx, types.NamespacedName{Namespace: tenant.WorkloadNamespace, Name: tenant.WorkloadPod(vm)}, &pod2))
	if pod2.Spec.NodeName != vm || pod2.Spec.Containers[0].Image != s.pool.WorkloadImage || pod2.Status.Phase != corev1.PodRunning {
		t.Errorf("workload pod: node %q image %q phase %s", pod2.Spec.NodeName, pod2.Spec.Containers[0].Image, pod2.Status.Phase)
	}
	recorded := map[string]bool{}
	for _, st := range r.cl.Timings().Stages {
		if st.Pool == s.pool.Names.Pool {
			recorded[st.Stage] = true
		}
	}
	for _, st := range join.Stages() {
		if !recorded[string(st)] {
			t.Errorf("stage %s not recorded in the clock (recorded: %v)", st, recorded)
		}
	}
	log := r.log.String()
	for _, want := range []string{"pool p: bootstrap-template: KairosConfigTemplate " + s.pool.Names.BootstrapTemplate() + " not rendered yet",
		"pool p: disk-import: Machine " + vm + ": DataVolume " + tenant.DataVolume(vm) + " ImportInProgress 42.0%",
		"pool p: guest-boot: Machine " + vm + ": VMI " + vm + " runs; its serial console is silent",
		"pool p: workload-pod: 1 of 1 Nodes run a workload pod"} {
		if !strings.Contains(log, want) {
			t.Errorf("progress log lacks %q:\n%s", want, log)
		}
	}
	if lines := strings.Count(log, "\n"); lines > 40 {
		t.Errorf("%d progress lines: one per change expected\n%s", lines, log)
	}
}

// Each case brings a Machine to the point where a controller reports a terminal state, then
// reports it; the join must end with the catalogue's class and stage within seconds.
func testTerminalStates(t *testing.T, w *world.World) {
	for _, tc := range []struct {
		name  string
		os    string
		class string
		stage join.Stage
		text  string
		setup func(s *scene) (vm, pod, ip string)
		fault func(s *scene, vm, pod, ip string)
	}{
		{"DataVolumeFailed", tenant.OSTalos, "disk-import", join.StageDiskImport, "Failed", toDisk, func(s *scene, vm, _, _ string) {
			s.dataVolume(vm, cdiv1.Failed, "3.0%", cdiv1.DataVolumeCondition{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "Error", Message: "import failed"})
		}},
		{"RegistryRefusedTheImporter", tenant.OSKairos, "disk-import", join.StageDiskImport, "401 Unauthorized", toDisk, func(s *scene, vm, _, _ string) {
			s.dataVolume(vm, cdiv1.ImportInProgress, "N/A", cdiv1.DataVolumeCondition{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "Error",
				Message: "Unable to process data: initializing source: reading manifest: 401 Unauthorized"})
		}},
		{"LauncherUnschedulable", tenant.OSTalos, "vm-unschedulable", join.StageVMIRunning, "Insufficient memory", func(s *scene) (string, string, string) {
			vm, _, ip := toDisk(s)
			s.dataVolume(vm, cdiv1.Succeeded, "100.0%")
			s.vmi(vm, kubevirtv1.Scheduling, ip)
			return vm, "", ip
		}, func(s *scene, vm, _, _ string) { s.launcher(vm, "512Gi") }},
		{"KubeadmRefusedInTheConsole", tenant.OSKairos, "join-rejected", join.StageJoin, "error execution phase kubelet-start", toBoot, func(s *scene, _, pod, _ string) {
			s.console(pod, "[   31.000000] kubeadm[812]: error execution phase kubelet-start: a Node with name \"x\" and status \"Ready\" already exists")
		}},
		{"NodeUnderAnotherName", tenant.OSKairos, "identity", join.StageProviderID, "registered as Node metal-", toBoot, func(s *scene, vm, _, ip string) {
			s.node("metal-"+strings.ToLower(vm[len(vm)-5:]), ip)
		}},
		{"LastingNoScheduleTaint", tenant.OSTalos, "not-schedulable", join.StageSchedulable, "e2e.cozystack.io/broken=true:NoSchedule", toLinked, func(s *scene, vm, _, _ string) {
			s.updateNode(vm, func(n *corev1.Node) {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "e2e.cozystack.io/broken", Value: "true", Effect: corev1.TaintEffectNoSchedule})
			})
		}},
		{"MachineFailed", tenant.OSTalos, "machine-failed", join.StageJoin, "InsufficientResources", toBoot, func(s *scene, vm, _, _ string) {
			s.failStatus(nil, "KubevirtMachine", vm, "InsufficientResources", "the VM could not be created")
		}},
		{"KubeletConfigWithoutClusterDNS", tenant.OSKairos, "cluster-dns", join.StageJoin, "carries no clusterDNS", toBoot, func(s *scene, _, _, _ string) {
			s.kubeletConfig("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n")
			s.t.Cleanup(func() { s.kubeletConfig(withClusterDNS) })
		}},
		{"KairosConfigFailed", tenant.OSKairos, "bootstrap", join.StageBootstrapData, "InvalidJoinConfiguration", func(s *scene) (string, string, string) {
			s.template()
			return s.machine("fffff"), "", ""
		}, func(s *scene, vm, _, _ string) {
			s.failStatus(nil, "KairosConfig", vm, "InvalidJoinConfiguration", "nodeRegistration.name is not a DNS-1123 name")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t, w, tc.os, 1)
			vm, pod, ip := tc.setup(s)
			r := s.start(2 * time.Minute)
			// The join has judged the scene before the fault, so the fault is a change it sees.
			s.poll("the join's first judgement", func() bool { _, ok := r.w.Progress(s.pool.Names.Pool); return ok })
			select {
			case <-r.done:
				t.Fatalf("the join ended before the fault: %v\n%s", r.err, r.log)
			default:
			}
			faulted := time.Now()
			tc.fault(s, vm, pod, ip)
			r.wait(t)
			took := r.at.Sub(faulted)
			var se *join.StageError
			if !errors.As(r.err, &se) {
				t.Fatalf("not a StageError: %v\n%s", r.err, r.log)
			}
			if string(se.Class) != tc.class || se.Stage != tc.stage || !strings.Contains(se.Detail, tc.text) {
				t.Errorf("got %s at %s: %q; want %s at %s with %q", se.Class, se.Stage, se.Detail, tc.class, tc.stage, tc.text)
			}
			t.Logf("%s at %s detected %s after the fault", se.Class, se.Stage, took.Round(time.Millisecond))
			if took > 2*time.Second {
				t.Errorf("detected %s after the fault; the detectors must act on the change itself", took)
			}
		})
	}
}

func testDeadline(t *testing.T, w *world.World) {
	s := newScene(t, w, tenant.OSTalos, 2)
	s.template()
	vm := s.machine("ddddd")
	s.bootstrapData(vm)
	s.dataVolume(vm, cdiv1.ImportInProgress, "7.0%")
	r := s.start(3 * time.Second)
	r.wait(t)
	var se *join.StageError
	if !errors.As(r.err, &se) || se.Class != "deadline" {
		t.Fatalf("%v", r.err)
	}
	// Two replicas wanted, one Machine: the pool waits for its Machines.
	if se.Stage != join.StageBootstrapData || !strings.Contains(se.Error(), "pool p: stuck at bootstrap-data for") ||
		!strings.Contains(se.Error(), "of 3s: 1 of 2 Machines (MachineDeployment kubernetes-") {
		t.Errorf("%v", se)
	}
	if se.Budget > 3*time.Second || se.Budget < 2*time.Second {
		t.Errorf("budget %s, want the phase's 3s", se.Budget)
	}
}

// Setups: a Machine brought to the stage before the fault.

func toDisk(s *scene) (string, string, string) {
	s.template()
	vm := s.machine("bbbbb")
	s.bootstrapData(vm)
	s.dataVolume(vm, cdiv1.ImportInProgress, "10.0%")
	return vm, "", s.ip()
}

func toBoot(s *scene) (string, string, string) {
	vm, _, ip := toDisk(s)
	s.dataVolume(vm, cdiv1.Succeeded, "100.0%")
	pod := s.launcher(vm, "1Gi")
	s.vmi(vm, kubevirtv1.Running, ip)
	s.poll("launcher running", func() bool {
		var p corev1.Pod
		return s.c.Get(s.ctx, types.NamespacedName{Namespace: s.ns(), Name: pod}, &p) == nil && p.Status.Phase == corev1.PodRunning
	})
	s.console(pod, "[    0.000000] Linux version 6.12.0")
	return vm, pod, ip
}

func toLinked(s *scene) (string, string, string) {
	vm, pod, ip := toBoot(s)
	// The CNI's startup taint, which its agent removes once it runs: the Node waits at schedulable.
	s.node(vm, ip, corev1.Taint{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule})
	s.providerID(vm, tenant.ProviderID(vm))
	s.link(vm, vm)
	return vm, pod, ip
}

func ptr[T any](v T) *T { return &v }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
