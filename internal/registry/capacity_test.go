package registry

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/capacity"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
)

// One truth about capacity: the lane check and the sim agree on how many workers fit. The sim
// lane with md0 grown to the check's limit is accepted and one worker more is refused, with the
// arithmetic; and on the sim's own Nodes, under the real kube-scheduler, that many launchers of
// the lane's dearest worker held to one Node (as a bound disk holds them) are all placed while
// one more is refused for the resource the check ran out of. If either side changes (the Nodes,
// the launcher's requests, the scheduler's sum), this fails.
func TestTheLaneCheckAndTheSimsSchedulerAgreeOnCapacity(t *testing.T) {
	l, err := lane.Load(filepath.Join("..", "..", "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sw := SimWorkers(l)
	if sw.Workers < 66 {
		t.Fatalf("the sim's Nodes hold %d workers on one Node (%s): less than a 64-worker pool beside the sim lane's two others", sw.Workers, sw.Why)
	}
	others := 0
	for _, p := range l.Pools[1:] {
		others += p.Replicas
	}
	l.Pools[0].Replicas = sw.Workers - others
	if err := Check(l); err != nil {
		t.Fatalf("a sim lane of %d workers, the limit, refused: %v", sw.Workers, err)
	}
	l.Pools[0].Replicas++
	err = Check(l)
	want := fmt.Sprintf("pools: %d worker VMs at once (%d in the pools of pools %d + classes %d, every cluster at once), each asking %s in its virt-launcher Pod, do not fit the sim's management Nodes (%s)",
		sw.Workers+1, sw.Workers+1, l.Pools[0].Replicas, others, sw.Price, capacity.Describe(sw.Nodes))
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "run at most "+strconv.Itoa(sw.Workers)+" workers at once") {
		t.Fatalf("a sim lane of %d workers, one over the limit: want %q, got %v", sw.Workers+1, want, err)
	}

	// The real scheduler on the sim's real Nodes.
	tools := cptest.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	w, err := world.Start(ctx, world.Options{Tools: tools, Dir: t.TempDir(), Nodes: capacity.Nodes()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	node := sw.Node
	cores, _ := strconv.ParseUint(tenant.WorkerCPU, 10, 32)
	console := false
	for _, p := range l.Pools {
		console = console || p.LogSerialConsole
	}
	launcher := func(i int) *corev1.Pod {
		// A launcher's compute container asking the price (held to the real virt-controller's
		// launcher by internal/sim/realupstream TestVirtController).
		price := capacity.WorkerPrice(uint32(cores), resource.MustParse(fmt.Sprintf("%dGi", tenant.WorkerMemoryGiB)), console)
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("virt-launcher-worker-%d", i), Namespace: "default"},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": node},
				Containers: []corev1.Container{{Name: "compute", Image: "quay.io/kubevirt/virt-launcher:v1.8.4",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: price.Memory, corev1.ResourceCPU: price.CPU}}}}}}
	}
	for i := range sw.Workers + 1 {
		if err := w.Cluster.Client.Create(ctx, launcher(i)); err != nil {
			t.Fatal(err)
		}
	}
	scheduled := func(i int) (corev1.PodCondition, bool) {
		var pod corev1.Pod
		if err := w.Cluster.Client.Get(ctx, client.ObjectKeyFromObject(launcher(i)), &pod); err != nil {
			return corev1.PodCondition{}, false
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return c, true
			}
		}
		return corev1.PodCondition{}, false
	}
	// The first Most are placed, in the order they came; the last never is.
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		placed := 0
		for i := range sw.Workers {
			if c, ok := scheduled(i); ok && c.Status == corev1.ConditionTrue {
				placed++
			}
		}
		c, ok := scheduled(sw.Workers)
		last = fmt.Sprintf("%d of %d placed; the last: %+v", placed, sw.Workers, c)
		return placed == sw.Workers && ok && c.Status == corev1.ConditionFalse, nil
	})
	if err != nil {
		t.Fatalf("the scheduler's verdict on %d launchers on Node %s: %v; %s", sw.Workers+1, node, err, last)
	}
	c, _ := scheduled(sw.Workers)
	if c.Reason != corev1.PodReasonUnschedulable || !strings.Contains(c.Message, "Insufficient "+sw.Resource) {
		t.Fatalf("launcher %d of %d on Node %s: %s %q; want Unschedulable for lack of %s (%s)", sw.Workers+1, sw.Workers+1, node, c.Reason, c.Message, sw.Resource, sw.Why)
	}
}

// A lane that runs only a suite of its own is charged that suite's workers alone: the
// nodelabels example runs the lane's pools, not the kubernetes suite's remediation, scaling
// and rollout workers.
func TestALaneIsChargedOnlyTheSuitesItRuns(t *testing.T) {
	l, err := lane.Load(filepath.Join("..", "..", "examples", "nodelabels", "lanes", "sim-nodelabels.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	peak, err := PeakWorkers(l)
	if err != nil {
		t.Fatal(err)
	}
	pools := 0
	for _, p := range l.Pools {
		pools += p.Replicas
	}
	if peak.Workers != pools || strings.Contains(peak.Why, "lifecycle") {
		t.Errorf("sim-nodelabels: %d workers (%s); want the pools' %d alone", peak.Workers, peak.Why, pools)
	}
	if errs := l.CheckSuites(Catalog(l)); len(errs) > 0 {
		t.Errorf("sim-nodelabels against its suite.yaml: %v", errs)
	}
}
