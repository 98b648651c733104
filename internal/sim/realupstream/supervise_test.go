package realupstream

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/platformwatch"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The kubelet restarts a first exit at once, then waits 10 s, 20 s, ... up to 5 min; a
// container that ran 10 minutes starts over.
func TestBackoffIsTheKubelets(t *testing.T) {
	o := KubeletBackoff()
	var b backoffState
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	var waits []time.Duration
	for range 8 {
		w := b.wait(now, now, o)
		waits = append(waits, w)
		now = now.Add(w)
		b.restarted(now, now, o)
		now = now.Add(time.Second) // it runs a second and exits again
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits after each exit = %v, want the kubelet's %v", waits, want)
	}
	// Ten minutes running: the next exit restarts at once and the back-off starts over.
	now = now.Add(601 * time.Second)
	if w := b.wait(now, now, o); w != 0 {
		t.Fatalf("after 601 s running the wait is %s, want 0", w)
	}
	b.restarted(now, now, o)
	if w := b.wait(now.Add(time.Second), now.Add(time.Second), o); w != 10*time.Second {
		t.Fatalf("the exit after a reset waits %s, want 10s", w)
	}
	// A wait counts from the exit: a look 4 s after it has 6 s left.
	if w := b.wait(now.Add(time.Second), now.Add(5*time.Second), o); w != 6*time.Second {
		t.Fatalf("4 s after the exit the wait left is %s, want 6s", w)
	}
}

// fakeController is a process that runs until killed, and exits 2 with "unknown flag" when
// given crashArg, as a real controller refuses a flag it does not know.
func fakeController(t *testing.T) *Controller {
	dir := t.TempDir()
	script := `echo "starting"; for a in "$@"; do if [ "$a" = "` + crashArg + `" ]; then echo "unknown flag: $a" >&2; exit 2; fi; done; exec sleep 600`
	ctl := &Controller{Process: controlplane.Process{Name: "fake-controller", Path: "/bin/sh",
		Args: []string{"-c", script, "sh"}, LogPath: filepath.Join(dir, "fake.log")}}
	ctl.restart = func(ctx context.Context) error {
		ctl.Started = time.Now()
		return ctl.Start()
	}
	if err := ctl.restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ctl
}

func TestSupervisorRestartsAsTheKubeletAndShowsThePod(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "supervise"})
	c, err := cluster.New("supervise", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctl := fakeController(t)
	pod := PlatformPod{Namespace: "cozy-kubevirt", Deployment: "virt-controller",
		Labels: map[string]string{"kubevirt.io": "virt-controller"}, Container: "virt-controller", Image: "quay.io/kubevirt/virt-controller:v1.8.4"}
	sup, err := Supervise(ctx, c, ctl, pod, Backoff{Initial: 300 * time.Millisecond, Max: time.Second, Reset: time.Minute}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Stop(time.Second)
	// The harness's platform watch reads the sim's Pod as it reads the platform's.
	var seen testkit.Buffer
	pw, err := platformwatch.Start(ctx, platformwatch.Options{Kube: c.Kube, Log: &seen, Components: []platformwatch.Component{
		{Name: "virt-controller", Namespace: "cozy-kubevirt", Deployment: "virt-controller", Selector: map[string]string{"kubevirt.io": "virt-controller"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Stop()
	key := client.ObjectKey{Namespace: "cozy-kubevirt", Name: "virt-controller-sim"}
	waitPod(ctx, t, c, key, "running and Ready, no restarts", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].Ready && cs[0].RestartCount == 0 && p.Labels["kubevirt.io"] == "virt-controller"
	})
	// From outside, as a person would: the Pod names the process (sim://<pid>), kill -9 ends it.
	firstPid := ctl.Pid()
	running := waitPod(ctx, t, c, key, "naming its process", func(p *corev1.Pod) bool { return len(p.Status.ContainerStatuses) == 1 })
	pid := strings.TrimPrefix(running.Status.ContainerStatuses[0].ContainerID, "sim://")
	if pid != strconv.Itoa(firstPid) {
		t.Fatalf("the Pod's containerID %q does not name the process %d", running.Status.ContainerStatuses[0].ContainerID, firstPid)
	}
	if out, err := exec.Command("kill", "-9", pid).CombinedOutput(); err != nil {
		t.Fatalf("kill -9 %s: %v: %s", pid, err, out)
	}
	p := waitPod(ctx, t, c, key, "restarted once after SIGKILL, Ready again", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.Ready && cs.RestartCount == 1 && cs.LastTerminationState.Terminated != nil
	})
	term := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if term.Signal != 9 || term.ExitCode != 137 || !strings.Contains(term.Message, "starting") {
		t.Fatalf("last termination = signal %d exit %d message %q, want signal 9, exit 137 and the log's end", term.Signal, term.ExitCode, term.Message)
	}
	for !strings.Contains(seen.String(), "platform: virt-controller restarted: ") {
		select {
		case <-ctx.Done():
			t.Fatalf("the platform watch did not show the restart; it logged:\n%s", seen.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if ctl.Pid() == firstPid {
		t.Fatalf("the controller still runs as pid %d after it was killed", firstPid)
	}
	if err := sup.CrashLoop(); err != nil {
		t.Fatal(err)
	}
	p = waitPod(ctx, t, c, key, "CrashLoopBackOff after restarts that exit 2", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" && cs.RestartCount >= 3 &&
			cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == 2
	})
	cs := p.Status.ContainerStatuses[0]
	if !strings.Contains(cs.LastTerminationState.Terminated.Message, "unknown flag: "+crashArg) || cs.Ready {
		t.Fatalf("crash-looping container: ready=%v, last message %q; want not ready and its last log line", cs.Ready, cs.LastTerminationState.Terminated.Message)
	}
	for {
		out := pw.Outages(ctx)
		if len(out) == 1 && strings.Contains(out[0], "virt-controller unavailable since") &&
			strings.Contains(out[0], "CrashLoopBackOff") && strings.HasSuffix(out[0], "unknown flag: "+crashArg) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the platform watch's outages %q: want virt-controller, CrashLoopBackOff and its last log line", out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status != corev1.ConditionFalse {
			t.Fatalf("Pod Ready is %s while the container crash-loops", cond.Status)
		}
	}
	// The Pod's Events are the kubelet's: Started at each restart, BackOff while it waits.
	var events corev1.EventList
	if err := c.Client.List(ctx, &events, client.InNamespace(key.Namespace)); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, e := range events.Items {
		if e.InvolvedObject.Name != key.Name || e.InvolvedObject.UID != p.UID || e.Source.Component != "kubelet" ||
			e.InvolvedObject.FieldPath != "spec.containers{virt-controller}" {
			t.Errorf("Event %s/%s %s on %+v from %+v: want the container's reference and the kubelet", e.Namespace, e.Name, e.Reason, e.InvolvedObject, e.Source)
			continue
		}
		reasons[e.Type+"/"+e.Reason]++
		if e.Reason == "BackOff" && e.Message != "Back-off restarting failed container virt-controller in pod virt-controller-sim_cozy-kubevirt("+string(p.UID)+")" {
			t.Errorf("BackOff message %q is not the kubelet's", e.Message)
		}
	}
	if reasons["Normal/Started"] < 3 || reasons["Warning/BackOff"] < 1 {
		t.Errorf("Events by reason %v: want a Normal Started per restart (at least 3) and a Warning BackOff", reasons)
	}
}

func waitPod(ctx context.Context, t *testing.T, c *cluster.Cluster, key client.ObjectKey, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	testkit.Eventually(ctx, t, "Pod "+key.String()+" "+what, testkit.Left(ctx), func() (bool, string) {
		err := c.Client.Get(ctx, key, p)
		return err == nil && ok(p), fmt.Sprintf("err %v, status %+v", err, p.Status.ContainerStatuses)
	})
	return p
}
