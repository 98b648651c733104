package join_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
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
	t.Run("SuspectsAreShownClearedAndNamedAtTheDeadline", func(t *testing.T) { testSuspects(t, w) })
	t.Run("RetriedStatesEndAtTheDeadlineInUpstreamsWords", func(t *testing.T) { testRetriedStates(t, w) })
	t.Run("TheDeadlineNamesTheStageAndWhatIsMissing", func(t *testing.T) { testDeadline(t, w) })
	t.Run("AfterAFallBackTheDeadlineNamesTheStageThePoolCouldNotPass", func(t *testing.T) { testFallBack(t, w) })
}

func testEveryStage(t *testing.T, w *world.World) {
	s := newScene(t, w, osfamily.Kairos, 1)
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
	// A console hears every stage the pool stood at, in join order (OnProgress).
	r.mu.Lock()
	heard := append([]join.Stage(nil), r.heard...)
	r.mu.Unlock()
	for i := 1; i < len(heard); i++ {
		if heard[i].Index() <= heard[i-1].Index() {
			t.Errorf("OnProgress heard the stages out of order: %v", heard)
		}
	}
	if len(heard) == 0 || heard[0] != join.StageBootstrapTemplate || heard[len(heard)-1].Index() < join.StageNodeRef.Index() {
		t.Errorf("OnProgress heard %v, want the stages from bootstrap-template on", heard)
	}
	var pod2 corev1.Pod
	s.must(s.c.Get(s.ctx, types.NamespacedName{Namespace: tenant.WorkloadNamespace, Name: tenant.WorkloadPod(vm)}, &pod2))
	if pod2.Spec.NodeName != vm || pod2.Spec.Containers[0].Image != workloadImage || pod2.Status.Phase != corev1.PodRunning {
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
		// before is the stage the join must have reached when the fault comes; stage is where
		// the fault must end it.
		before, stage join.Stage
		text          string
		setup         func(s *scene) (vm, pod, ip string)
		fault         func(s *scene, vm, pod, ip string)
	}{
		{"DataVolumeFailedWithTheRegistrysRefusal", osfamily.Talos, "disk-import", join.StageDiskImport, join.StageDiskImport, "403 Forbidden", toDisk, func(s *scene, vm, _, _ string) {
			s.dataVolume(vm, cdiv1.Failed, "3.0%", cdiv1.DataVolumeCondition{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "Error",
				Message: "Unable to process data: initializing source: reading manifest: 403 Forbidden"})
		}},
		{"RegistryRefusedTheImporter", osfamily.Kairos, "disk-import", join.StageDiskImport, join.StageDiskImport, "401 Unauthorized", toDisk, func(s *scene, vm, _, _ string) {
			s.dataVolume(vm, cdiv1.ImportInProgress, "N/A", cdiv1.DataVolumeCondition{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "Error",
				Message: "Unable to process data: initializing source: reading manifest: 401 Unauthorized"})
		}},
		{"LauncherUnschedulable", osfamily.Talos, "vm-unschedulable", join.StageVMIRunning, join.StageVMIRunning, "Insufficient memory", func(s *scene) (string, string, string) {
			vm, _, ip := toDisk(s)
			s.dataVolume(vm, cdiv1.Succeeded, "100.0%")
			s.vmi(vm, kubevirtv1.Scheduling, ip)
			return vm, "", ip
		}, func(s *scene, vm, _, _ string) { s.launcher(vm, "512Gi") }},
		{"LauncherOfALongVMINameUnschedulable", osfamily.Talos, "vm-unschedulable", join.StageVMIRunning, join.StageVMIRunning, "Insufficient memory", func(s *scene) (string, string, string) {
			vm, _, ip := toDisk(s)
			if len(vm) <= 43 {
				s.t.Fatalf("VMI name %q (%d characters) is not long enough for the apiserver to cut its launcher's name", vm, len(vm))
			}
			s.dataVolume(vm, cdiv1.Succeeded, "100.0%")
			s.vmi(vm, kubevirtv1.Scheduling, ip)
			return vm, "", ip
		}, func(s *scene, vm, _, _ string) { s.launcher(vm, "512Gi") }},
		{"TalosNodeUnderAnotherName", osfamily.Talos, "identity", join.StageJoin, join.StageProviderID, "registered as Node talos-", toBoot, func(s *scene, vm, _, ip string) {
			s.node("talos-"+strings.ToLower(vm[len(vm)-5:]), ip)
		}},
		{"LastingNoScheduleTaint", osfamily.Talos, "not-schedulable", join.StageSchedulable, join.StageSchedulable, "e2e.cozystack.io/broken=true:NoSchedule", toLinked, func(s *scene, vm, _, _ string) {
			s.updateNode(vm, func(n *corev1.Node) {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "e2e.cozystack.io/broken", Value: "true", Effect: corev1.TaintEffectNoSchedule})
			})
		}},
		{"KubeletConfigWithoutClusterDNS", osfamily.Kairos, "cluster-dns", join.StageJoin, join.StageJoin, "carries no clusterDNS", toBoot, func(s *scene, _, _, _ string) {
			s.kubeletConfig("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n")
			s.t.Cleanup(func() { s.kubeletConfig(withClusterDNS) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t, w, tc.os, 1)
			if strings.Contains(tc.name, "LongVMIName") {
				// A 10-character run id and a long pool: kubernetes-<app>-<pool>-<5>-<5> is 60.
				s = newSceneNamed(t, w, tc.os, 1, "pools-1234567890", "workers-long")
			}
			vm, pod, ip := tc.setup(s)
			r := s.start(2 * time.Minute)
			// The join has judged the scene at its stage before the fault, so the fault is a
			// change it sees (a console line, for one, is read a moment after it is written).
			s.poll("the join at stage "+string(tc.before), func() bool {
				p, ok := r.w.Progress(s.pool.Names.Pool)
				return ok && p.Stage == tc.before
			}, r.log, progressOf{r.w, s.pool.Names.Pool})
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
	s := newScene(t, w, osfamily.Talos, 2)
	s.template()
	s.importing(s.machine("ddddd"), "7.0%")
	r := s.start(3 * time.Second)
	r.wait(t)
	var se *join.StageError
	if !errors.As(r.err, &se) || se.Class != "deadline" {
		t.Fatalf("%v", r.err)
	}
	// Two replicas wanted, one Machine: the pool waits for its Machines. The budget is what was
	// left of the phase when the join began: 3s, less however long a busy machine took to start
	// the join (over a second at load 5 under nice 19), never more and never nothing.
	if se.Stage != join.StageBootstrapData || !strings.Contains(se.Error(), "pool p: stuck at bootstrap-data for") ||
		!strings.Contains(se.Error(), fmt.Sprintf("of %s: 1 of 2 Machines (MachineDeployment kubernetes-", se.Budget.Round(time.Second))) {
		t.Errorf("%v", se)
	}
	if se.Budget > 3*time.Second || se.Budget <= 0 {
		t.Errorf("budget %s, want what was left of the phase's 3s", se.Budget)
	}
}

// A Machine stuck at its import is replaced (as a MachineHealthCheck does) and the replacement
// starts over: when the budget runs out, the failure is the import the pool could not pass,
// for as long as the pool has stood there, with where the pool fell back to, or how often.
func testFallBack(t *testing.T, w *world.World) {
	for _, tc := range []struct {
		name    string
		returns bool // the replacement reaches the import again
		want    []string
	}{
		{"StaysBehind", false, []string{"3.14%", "fell back to bootstrap-data", "-ggggg", "-fffff"}},
		{"ReachesTheImportAgain", true, []string{"3.14%", "-ggggg", "fell back from disk-import 1 time(s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t, w, osfamily.Talos, 1)
			s.template()
			vm := s.machine("fffff")
			s.importing(vm, "3.14%")
			r := s.start(8 * time.Second)
			s.at(r, join.StageDiskImport)
			s.remove(vm)
			next := s.machine("ggggg")
			s.at(r, join.StageBootstrapData)
			if tc.returns {
				s.importing(next, "3.14%")
				s.at(r, join.StageDiskImport)
			}
			r.wait(t)
			var se *join.StageError
			if !errors.As(r.err, &se) || se.Class != "deadline" {
				t.Fatalf("%v", r.err)
			}
			msg := se.Error()
			if se.Stage != join.StageDiskImport {
				t.Errorf("stage %s, want disk-import: %v", se.Stage, se)
			}
			t.Log(msg)
			for _, part := range tc.want {
				if !strings.Contains(msg, part) {
					t.Errorf("the failure does not say %q: %v", part, se)
				}
			}
			if se.Elapsed < se.Budget/2 {
				t.Errorf("stuck for %s: the pool stood at disk-import since early in the %s budget", se.Elapsed, se.Budget)
			}
		})
	}
}

// A state upstream tries again from is a suspect: the join waits it out, and the deadline
// failure names it in upstream's words. Here: a claim CDI does not render yet (it reconciles
// the DataVolume again when a StorageClass or a StorageProfile changes), and a kubeadm error on a
// Kairos console (its kubeadm provider joins again 10 s later).
func testRetriedStates(t *testing.T, w *world.World) {
	for _, tc := range []struct {
		name   string
		stage  join.Stage
		words  string
		setup  func(s *scene) (vm, pod, ip string)
		change func(s *scene, vm, pod string)
	}{
		{"ClaimCDIDoesNotRenderYet", join.StageDiskImport, "ErrClaimNotValid: no accessMode specified in StorageProfile replicated", toDisk, func(s *scene, vm, _ string) {
			s.dataVolume(vm, "", "", cdiv1.DataVolumeCondition{Type: cdiv1.DataVolumeBound, Status: corev1.ConditionFalse,
				Reason: "ErrClaimNotValid", Message: "no accessMode specified in StorageProfile replicated"})
		}},
		{"KubeadmErrorOnTheConsole", join.StageJoin, "error execution phase preflight: couldn't validate the identity of the API Server", toBoot, func(s *scene, _, pod string) {
			s.kubeletConfig(withClusterDNS)
			s.console(pod, "error execution phase preflight: couldn't validate the identity of the API Server: connection refused", "failed to apply kubeadm join, will retry in 10s")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t, w, osfamily.Kairos, 1)
			vm, pod, _ := tc.setup(s)
			r := s.start(8 * time.Second)
			s.at(r, tc.stage)
			tc.change(s, vm, pod)
			r.wait(t)
			var se *join.StageError
			if !errors.As(r.err, &se) || se.Class != "deadline" {
				t.Fatalf("want the deadline, not a verdict: %v\n%s", r.err, r.log)
			}
			if msg := se.Error(); se.Stage != tc.stage || !strings.Contains(msg, tc.words) {
				t.Errorf("the deadline failure at %s does not say %q in upstream's words: %s", se.Stage, tc.words, msg)
			}
		})
	}
}
