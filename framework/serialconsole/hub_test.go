package serialconsole

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

const ns = "tenant-console"

// A VMI's console subresource is dialled once it runs, read to its end, and never dialled
// again while the VMI runs (a person's virtctl console took it); a dial that fails is tried
// again and said once per reason; a replacement VMI gets a stream of its own; a VMI that stops
// ends its stream; Close ends the rest. The management cluster is the sim's (kwok), so the
// launcher Pods and their console container logs are real API objects.
func TestHubHoldsOneConnectionPerVMIAndGivesATakenConsoleUp(t *testing.T) {
	w, ctx := startWorld(t)
	c := w.Cluster
	ports := newPorts()
	h, rec := startHub(t, ctx, c, ports)

	ports.refuse("vm-a", errors.New(`Can't connect to websocket (400): VMI is not running`))
	vmiA := runGuest(t, ctx, w, "vm-a")
	testkit.Eventually(t.Context(), t, "vm-a's refusal heard", 30*time.Second, testkit.Holds(func() bool { return rec.has("unreadable vm-a console subresource: Can't connect") }))
	ports.accept("vm-a")
	testkit.Eventually(t.Context(), t, "vm-a connected", 30*time.Second, testkit.Holds(func() bool { return ports.connections("vm-a") == 1 }))
	ports.say("vm-a", "[    0.000000] Linux version 6.12", "[talos] task startAllServices")
	testkit.Eventually(t.Context(), t, "vm-a's two lines", 30*time.Second, testkit.Holds(func() bool { return rec.count("line vm-a") == 2 }), heardBy(rec))

	// A person connects: KubeVirt closes the harness's connection. The harness does not dial
	// again while the VMI runs, whatever changes.
	ports.kick("vm-a")
	testkit.Eventually(t.Context(), t, "vm-a's stream ended", 30*time.Second, testkit.Holds(func() bool { return rec.has("ended vm-a " + EndedTaken) }))
	touch(t, ctx, c, vmiA)
	time.Sleep(300 * time.Millisecond)
	if n := ports.connections("vm-a"); n != 1 {
		t.Fatalf("the harness connected to vm-a's console %d times; want 1, never again after the console was taken", n)
	}

	// The VMI is replaced: same name, new UID, a stream of its own.
	stopVMI(t, ctx, c, vmiA)
	ports.accept("vm-a")
	vmiA2 := runGuest(t, ctx, w, "vm-a")
	testkit.Eventually(t.Context(), t, "the replacement connected", 30*time.Second, testkit.Holds(func() bool { return ports.connections("vm-a") == 2 }))
	ports.say("vm-a", "replacement boots")
	testkit.Eventually(t.Context(), t, "the replacement's line", 30*time.Second, testkit.Holds(func() bool { return rec.has("line vm-a replacement boots uid=" + string(vmiA2.UID)) }))

	// A VMI that stops ends its stream with that reason.
	stopVMI(t, ctx, c, vmiA2)
	testkit.Eventually(t.Context(), t, "the replacement's end", 30*time.Second, testkit.Holds(func() bool { return rec.has("ended vm-a the VMI stopped running") }))

	// Close ends the rest.
	ports.accept("vm-b")
	runGuest(t, ctx, w, "vm-b")
	testkit.Eventually(t.Context(), t, "vm-b started", 30*time.Second, testkit.Holds(func() bool { return rec.has("started vm-b console subresource") }))
	h.Close()
	if !rec.has("ended vm-b the run stopped reading") {
		t.Fatalf("Close did not end vm-b's stream:\n%s", rec.text())
	}
	if open := ports.open(); open != 0 {
		t.Fatalf("%d console connection(s) left open after Close", open)
	}
}

// A pool that sets logSerialConsole has a guest-console-log container: its log is read instead
// of the subresource (no connection is made), each line with the time the log recorded, and a
// restarted container instance is a stream of its own. A temporary launcher is not read.
func TestHubReadsTheConsoleLogWhereTheLauncherHasOne(t *testing.T) {
	w, ctx := startWorld(t)
	c := w.Cluster
	ports := newPorts()
	h, rec := startHub(t, ctx, c, ports)

	// The launcher runs before the VMI does, as on a real cluster.
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm-log", Namespace: ns}}
	testkit.Must(t, c.Client.Create(ctx, vmi))
	logged := time.Date(2026, 12, 3, 7, 0, 0, 123456789, time.UTC)
	launcher(t, ctx, w, vmi, "tmp01", true, "temporary launcher: no guest")
	pod := launcher(t, ctx, w, vmi, "abcde", false, "[    1.000000] kairos: agent started", "This node has joined the cluster")
	testkit.Eventually(t.Context(), t, "the launcher's console container running", 30*time.Second, testkit.Holds(func() bool {
		var p corev1.Pod
		_ = c.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)
		_, _, ok := logStatus(&p)
		return ok
	}))
	vmi.Status.Phase = kubevirtv1.Running
	testkit.Must(t, c.Client.Status().Update(ctx, vmi))
	path, err := w.ContainerLog(ns, pod.Name, LogContainer)
	if err != nil {
		t.Fatal(err)
	}
	if err := simenv.WriteContainerLog(path, logged, "late line"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t.Context(), t, "the log's three lines", 30*time.Second, testkit.Holds(func() bool { return rec.count("line vm-log") == 3 }))
	if ports.dials("vm-log") != 0 {
		t.Fatal("the subresource was dialled for a VMI whose launcher logs its console")
	}
	if rec.has("temporary launcher") {
		t.Fatal("the temporary launcher's console was read")
	}
	if !rec.hasAt("late line", logged) {
		t.Fatalf("the late line does not carry the time it was logged (%s):\n%s", logged, rec.text())
	}
	if !rec.has("started vm-log guest-console-log pod=" + pod.Name + " restart=0") {
		t.Fatalf("the stream does not name its launcher container instance:\n%s", rec.text())
	}
	// One who subscribes late (a join started for a pool that already runs) hears the stream
	// from its start, in order, and then what follows.
	late := &recorder{}
	h.Subscribe(late)
	// A reason the log was unreadable that a later line cleared (the log appeared a moment late
	// on a busy machine) is history, not backlog: the late subscriber does not hear it.
	if got, want := late.text(), withoutUnreadable(rec.text()); got != want {
		t.Fatalf("a late subscriber heard\n%s\nwhere the first one heard\n%s", got, want)
	}
	if err := simenv.WriteContainerLog(path, logged.Add(time.Second), "after the late subscriber"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t.Context(), t, "the next line at the late subscriber", 30*time.Second, testkit.Holds(func() bool { return late.has("line vm-log after the late subscriber") }), heardBy(late))
}

func startWorld(t *testing.T) (*world.World, context.Context) {
	t.Helper()
	tools := cptest.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	w, err := world.Start(ctx, world.Options{Tools: tools, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if err := w.Cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t.Context(), t, "the default ServiceAccount of "+ns, 30*time.Second, testkit.Holds(func() bool {
		var sa corev1.ServiceAccount
		return w.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &sa) == nil
	}))
	return w, ctx
}

// startHub starts a hub on the management cluster c, dialling consoles through ports and
// trying a failed dial again after 50 ms, with a recorder subscribed; the test's cleanup closes
// it (a test may close it earlier: the second Close ends nothing more).
func startHub(t *testing.T, ctx context.Context, c *cluster.Cluster, ports *ports) (*Hub, *recorder) {
	t.Helper()
	h, err := Start(ctx, Options{Management: c, Namespace: ns, Dial: ports.dial, Retry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	rec := &recorder{}
	h.Subscribe(rec)
	return h, rec
}

// runVMI creates VMI name and sets it Running, as virt-handler does once its domain runs.
func runVMI(t *testing.T, ctx context.Context, c *cluster.Cluster, name string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	testkit.Must(t, c.Client.Create(ctx, vmi))
	vmi.Status.Phase = kubevirtv1.Running
	testkit.Must(t, c.Client.Status().Update(ctx, vmi))
	return vmi
}

// runGuest runs VMI name with a launcher that does not log its console (Cozystack's default).
func runGuest(t *testing.T, ctx context.Context, w *world.World, name string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := runVMI(t, ctx, w.Cluster, name)
	launcherPod(t, ctx, w, vmi, string(vmi.UID)[:5], false, false)
	return vmi
}

// stopVMI sets the VMI Succeeded, then deletes it.
func stopVMI(t *testing.T, ctx context.Context, c *cluster.Cluster, vmi *kubevirtv1.VirtualMachineInstance) {
	t.Helper()
	testkit.Must(t, c.Client.Get(ctx, client.ObjectKeyFromObject(vmi), vmi))
	vmi.Status.Phase = kubevirtv1.Succeeded
	testkit.Must(t, c.Client.Status().Update(ctx, vmi))
	testkit.Must(t, c.Client.Delete(ctx, vmi))
	testkit.Eventually(t.Context(), t, "VMI "+vmi.Name+" gone", 30*time.Second, testkit.Holds(func() bool {
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKeyFromObject(vmi), &kubevirtv1.VirtualMachineInstance{}))
	}))
}

// touch changes the VMI, so the hub looks at it again.
func touch(t *testing.T, ctx context.Context, c *cluster.Cluster, vmi *kubevirtv1.VirtualMachineInstance) {
	t.Helper()
	testkit.Must(t, c.Client.Get(ctx, client.ObjectKeyFromObject(vmi), vmi))
	vmi.Labels = map[string]string{"touched": "yes"}
	testkit.Must(t, c.Client.Update(ctx, vmi))
}

// launcher creates VMI vmi's launcher Pod (temporary: the one of a volume waiting for its first
// consumer) with a guest-console-log container whose log already holds lines; kwok runs it.
func launcher(t *testing.T, ctx context.Context, w *world.World, vmi *kubevirtv1.VirtualMachineInstance, suffix string, temporary bool, lines ...string) *corev1.Pod {
	return launcherPod(t, ctx, w, vmi, suffix, temporary, true, lines...)
}

// launcherPod creates a launcher Pod, with a guest-console-log container when withLog.
func launcherPod(t *testing.T, ctx context.Context, w *world.World, vmi *kubevirtv1.VirtualMachineInstance, suffix string, temporary, withLog bool, lines ...string) *corev1.Pod {
	t.Helper()
	name := "virt-launcher-" + vmi.Name + "-" + suffix
	for _, ct := range []string{"compute", LogContainer} {
		path, err := w.ContainerLog(ns, name, ct)
		testkit.Must(t, err)
		if ct == LogContainer {
			testkit.Must(t, simenv.WriteContainerLog(path, time.Now(), lines...))
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{"kubevirt.io": "virt-launcher", labelCreatedBy: string(vmi.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: vmi.Name,
				UID: vmi.UID, Controller: testkit.Ptr(true)}}},
		Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{
				{Name: "compute", Image: "virt-launcher", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}},
				{Name: LogContainer, Image: "virt-launcher"},
			}},
	}
	if !withLog {
		pod.Spec.Containers = pod.Spec.Containers[:1]
	}
	if temporary {
		pod.Annotations = map[string]string{annEphemeral: "true"}
	}
	testkit.Must(t, w.Cluster.Client.Create(ctx, pod))
	return pod
}
