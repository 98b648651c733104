package simlane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// realNodeLaneTimeout bounds one run of lanes/sim-node.yaml: its jobCap.
const realNodeLaneTimeout = 20 * time.Minute

// The real-Node lane, green, as `make e2e LANE=sim-node` runs it, under what a real cluster
// brings: the registry unavailable once (registry-unavailable-once: CDI's real importer exits
// and the real kubelet restarts it), the guest's kubelet killed once (guest-kubelet-crash-once:
// machined starts it again and it joins; the harness shows a suspect that clears), the worker's
// QEMU killed once and its virt-launcher Pod deleted once (realNodeWatch's outside hands:
// KubeVirt starts the VM again each time). Its one Talos worker's VM runs on the real Node and
// joins by the kubelet inside it (checkGuestJoin). While it runs, the test watches what `kubectl
// get pods -o wide` shows on the management cluster (virt-handler, virt-api, the worker's virt-launcher and its importer Running
// on the real Node), the host's processes (a qemu-system-x86_64 of that launcher under TCG) and
// the Node's volumes (a folder on the host whose disk.img begins with the worker's disk built
// here). After it: the worker's serial console in the artifacts, read through virt-api's console
// subresource, holds the guest kernel's own boot and its init's lines; the DataVolume went
// through the real cdi-controller's phases (checkRealImport says why not its progress); run.json
// lists the real Node's components with versions.
// Outside CI a host without the real Node's packages skips it, naming them; under CI it fails.
func TestTheRealNodeLaneIsGreenOnTheRealNode(t *testing.T) {
	realNodePreflight(t)
	imgs, err := node.FindImages()
	if err != nil {
		t.Fatal(err)
	}
	built, err := os.ReadFile(imgs.WorkerDiskJoinFile())
	if err != nil {
		t.Fatal(err)
	}
	root := projectRoot(t)
	bin := buildOrchestrator(t, root)
	tmp := shortTmp(t)
	art := filepath.Join(t.TempDir(), "artifacts")
	ctx, cancel := context.WithTimeout(context.Background(), realNodeLaneTimeout)
	defer cancel()
	l, err := lane.Load(filepath.Join(root, "lanes", "sim-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := faults.Parse(realNodeGreenFaults)
	if err != nil {
		t.Fatal(err)
	}
	cmd := laneCommand(root, bin, "sim-node", "E2E_ARTIFACTS="+art, "TMPDIR="+tmp, "E2E_SIM_FAULT="+realNodeGreenFaults)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &realNodeWatch{tmp: tmp, disk: built[:min(len(built), 64<<10)], seen: map[string]string{}}
	watched := make(chan struct{})
	go func() { defer close(watched); w.run(ctx) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Signal(os.Interrupt)
		werr = <-done
		t.Errorf("the sim-node lane did not end within %s", realNodeLaneTimeout)
	}
	cancel()
	<-watched
	if code := exitCode(werr); code != verdict.ExitPass {
		t.Fatalf("bin/e2e run --lane sim-node exited %d (%v), want 0; its output ends:\n%s", code, werr, tail(out.String(), 40))
	}
	w.check(t)
	w.checkHands(t)
	w.checkGuestJoin(t, art)
	checkRealConsole(t, art)
	checkRealImport(t, art)
	checkTolerated(t, l, set, art)
	checkRealComponents(t, art)
}

// realNodeGreenFaults are the faults the real Node's green run carries, each absorbed by what
// runs for real: the registry refuses the worker's disk once (CDI's importer exits, the kubelet
// restarts it), the guest's kubelet is killed once (machined starts it again 5 s later).
const realNodeGreenFaults = string(faults.RegistryUnavailableOnce) + "," + string(faults.GuestKubeletCrashOnce)

// realNodePreflight: outside CI a host without the real Node's packages skips the test, naming
// them; under CI it fails.
func realNodePreflight(t *testing.T) {
	t.Helper()
	if err := simulated.NodePreflight(simulated.ThisHost()); err != nil {
		testkit.Unavailable(t, err)
	}
}

// shortTmp is a short temporary folder for a real-Node run's TMPDIR: the Node's sockets live
// under the run's work folder, and a socket's path is at most 107 bytes.
func shortTmp(t *testing.T) string {
	t.Helper()
	tmp, err := os.MkdirTemp("/tmp", "sn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	return tmp
}

// realNodeWatch records, while the lane runs, what is seen on the real Node: each Pod's phase by
// component, the launcher's QEMU process, and the worker's disk in a volume folder. It is also
// the run's outside hands, each once: when the worker's first VMI runs, its QEMU process is
// killed (SIGKILL); when the VMI KubeVirt starts in its place runs, its virt-launcher Pod is
// deleted with a grace period of 1 s (`kubectl delete pod --grace-period=1`: the default, the
// VMI's 180 s and 15 more, would have virt-launcher wait that long for a guest still booting to
// act on the ACPI shutdown, cmd/virt-launcher/virt-launcher.go), and the real kubelet kills its
// containers, QEMU with them. KubeVirt starts the VM again each time (runStrategy Always), and the
// third VMI's worker joins.
type realNodeWatch struct {
	tmp  string
	disk []byte
	dyn  dynamic.Interface

	killed, deleted handDone
	runs            []string // the UIDs of the md0 VMIs seen Running on the real Node, in order

	mu   sync.Mutex
	seen map[string]string // component -> "Running on real-node-0 (pod ...)" once seen
	qemu string            // the command line of the launcher's QEMU, once seen
	join *guestJoined      // the worker that joined, once its workload pod ran
	vol  string            // the volume folder holding the worker's disk, once seen
	last string            // where the watch stood, for a failure's message
}

// realNodeComponents tells each Pod on the real Node by its name's prefix.
var realNodeComponents = []string{"virt-handler", "virt-api", "virt-launcher", "importer"}

// handDone is what one outside hand did, once it did.
type handDone struct {
	vmi, uid, what string
	at             time.Time
	err            error
}

func (w *realNodeWatch) run(ctx context.Context) {
	var cs kubernetes.Interface
	for {
		if cs == nil {
			cs = w.client()
		}
		if cs != nil {
			w.pods(ctx, cs)
			w.hands(ctx, cs)
		}
		w.processes()
		w.volumes()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// client reaches the management cluster through the run's kubeconfig, once it is written.
func (w *realNodeWatch) client() kubernetes.Interface {
	files, _ := filepath.Glob(filepath.Join(w.tmp, "cozy-e2e-sim-node-*", "sim", "management.kubeconfig"))
	if len(files) == 0 {
		return nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", files[0])
	if err != nil {
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	if w.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil
	}
	return cs
}

var vmiResource = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}

// hands does the outside hands' work: see realNodeWatch.
func (w *realNodeWatch) hands(ctx context.Context, cs kubernetes.Interface) {
	list, err := w.dyn.Resource(vmiResource).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, vmi := range list.Items {
		phase, _, _ := unstructured.NestedString(vmi.Object, "status", "phase")
		nodeName, _, _ := unstructured.NestedString(vmi.Object, "status", "nodeName")
		if !strings.Contains(vmi.GetName(), "-md0-") || phase != "Running" || nodeName != simulated.RealNodeName {
			continue
		}
		uid := string(vmi.GetUID())
		if !slices.Contains(w.runs, uid) {
			w.runs = append(w.runs, uid)
		}
		w.joined(ctx, cs, vmi)
		switch {
		case w.killed.at.IsZero() && len(w.runs) == 1:
			w.killed = killQEMU(vmi.GetNamespace(), vmi.GetName(), uid)
		case w.deleted.at.IsZero() && len(w.runs) == 2 && uid == w.runs[1]:
			w.deleted = deleteLauncher(ctx, cs, vmi.GetNamespace(), vmi.GetName(), uid)
		}
	}
}

// killQEMU kills the QEMU process of VMI ns/name (its domain is <ns>_<name>) with SIGKILL.
func killQEMU(ns, name, uid string) handDone {
	d := handDone{vmi: ns + "/" + name, uid: uid, at: time.Now()}
	out, err := exec.Command("pgrep", "-f", "qemu-system-x86_64 -name guest="+ns+"_"+name+",").Output()
	pids := strings.Fields(string(out))
	if err != nil || len(pids) != 1 {
		d.err = fmt.Errorf("the QEMU process of VMI %s: pgrep found %v (%v)", d.vmi, pids, err)
		return d
	}
	d.what = "QEMU pid " + pids[0]
	if out, err := exec.Command("kill", "-KILL", pids[0]).CombinedOutput(); err != nil {
		d.err = fmt.Errorf("kill -KILL %s: %v %s", pids[0], err, out)
	}
	return d
}

// deleteLauncher deletes the virt-launcher Pod of VMI ns/name (uid) with a grace period of 1 s.
func deleteLauncher(ctx context.Context, cs kubernetes.Interface, ns, name, uid string) handDone {
	d := handDone{vmi: ns + "/" + name, uid: uid, at: time.Now()}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/created-by=" + uid})
	if err != nil {
		d.err = err
		return d
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Annotations["kubevirt.io/ephemeral-provisioning"] == "true" {
			continue
		}
		d.what = "Pod " + p.Name
		d.err = cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(1))})
		return d
	}
	d.err = fmt.Errorf("VMI %s has no Running launcher Pod (%d Pods)", d.vmi, len(pods.Items))
	return d
}

// checkHands: each hand did its work once, and KubeVirt started the VM again after each: three
// VMIs of the worker ran on the real Node.
func (w *realNodeWatch) checkHands(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range []struct {
		name string
		d    handDone
	}{{"killing the first VMI's QEMU", w.killed}, {"deleting the second VMI's launcher", w.deleted}} {
		switch {
		case h.d.at.IsZero():
			t.Errorf("the outside hand %s never acted: VMIs seen Running %v", h.name, w.runs)
		case h.d.err != nil:
			t.Errorf("the outside hand %s: %v", h.name, h.d.err)
		default:
			t.Logf("the outside hand %s: VMI %s (UID %s), %s, at %s", h.name, h.d.vmi, h.d.uid, h.d.what, h.d.at.Format(time.RFC3339Nano))
		}
	}
	if len(w.runs) < 3 {
		t.Errorf("%d VMIs of the md0 worker ran on the real Node (%v), want 3: KubeVirt starts the VM again after each hand", len(w.runs), w.runs)
	}
}

func (w *realNodeWatch) pods(ctx context.Context, cs kubernetes.Interface) {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + simulated.RealNodeName})
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.last = "listing the real Node's Pods: " + err.Error()
		return
	}
	var now []string
	for _, p := range list.Items {
		now = append(now, p.Name+" "+string(p.Status.Phase))
		for _, c := range realNodeComponents {
			if strings.HasPrefix(p.Name, c+"-") && p.Status.Phase == corev1.PodRunning && w.seen[c] == "" {
				w.seen[c] = "pod " + p.Namespace + "/" + p.Name + " Running on " + p.Spec.NodeName + ", IP " + p.Status.PodIP
			}
		}
	}
	w.last = "the real Node's Pods: " + strings.Join(now, ", ")
}

func (w *realNodeWatch) processes() {
	out, _ := exec.Command("pgrep", "-a", "qemu-system-x86").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "qemu-system-x86_64") && strings.Contains(l, "-md0-") && strings.Contains(l, "-accel tcg") {
			w.mu.Lock()
			if w.qemu == "" {
				w.qemu = l
			}
			w.mu.Unlock()
		}
	}
}

func (w *realNodeWatch) volumes() {
	files, _ := filepath.Glob(filepath.Join(w.tmp, "cozy-e2e-sim-node-*", "sim", "node", "local-path", "*", "disk.img"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		head := make([]byte, len(w.disk))
		n, _ := fh.Read(head)
		fh.Close()
		if n == len(w.disk) && bytes.Equal(head, w.disk) {
			w.mu.Lock()
			if w.vol == "" {
				w.vol = filepath.Dir(f)
			}
			w.mu.Unlock()
		}
	}
}

func (w *realNodeWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range realNodeComponents {
		if w.seen[c] == "" {
			t.Errorf("no %s Pod was seen Running on the real Node %s during the run (last: %s)", c, simulated.RealNodeName, w.last)
		} else {
			t.Logf("%s: %s", c, w.seen[c])
		}
	}
	if w.qemu == "" {
		t.Errorf("no qemu-system-x86_64 of the md0 worker's launcher under TCG was seen on the host during the run")
	} else {
		t.Logf("QEMU on the host: %.200s", w.qemu)
	}
	if w.vol == "" {
		t.Errorf("no volume folder of the real Node held a disk.img beginning with the worker's disk built here")
	} else {
		t.Logf("the worker's disk in the volume folder %s", w.vol)
	}
}

// checkRealConsole: a console of the md0 worker (the VMI that joined: KubeVirt's earlier ones
// were stopped by the run's outside hands, maybe before their init), read through virt-api's
// console subresource, holds the guest kernel's boot and its init's lines, the bootstrap data it
// read from its config drive among them.
func checkRealConsole(t *testing.T, art string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(art, "pools", "md0", "consoles", "*", "*.log"))
	if len(files) == 0 {
		t.Fatalf("no console of pool md0 in the artifacts (%s)", art)
	}
	want := []string{"read from: the VMI's console subresource", "node " + simulated.RealNodeName, "Linux version ", node.GuestInit, "cozy-e2e guest: config drive /dev/vd"}
	var lacks []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, w := range want {
			if !strings.Contains(string(data), w) {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			t.Logf("the guest's boot, read through virt-api, in %s", f)
			return
		}
		lacks = append(lacks, fmt.Sprintf("%s lacks %q", filepath.Base(f), missing))
	}
	t.Errorf("no console of pool md0 holds all of %q: %s", want, strings.Join(lacks, "; "))
}

// checkRealImport: the DataVolume went through the real cdi-controller's phases on its way to
// the disk-import stage's pass. Its progress is the importer's own only while qemu-img converts
// the disk (CDI v1.64.0 pkg/image/qemu.go:112-120, 279-291: the -p output becomes the progress
// metric cdi-controller reads every 2 s); this disk converts in well under that, so the progress
// is mostly N/A until Succeeded, and ImportInProgress itself may pass between two of the
// harness's reads: the test asks for neither.
func checkRealImport(t *testing.T, art string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(art, "harness.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"WaitForFirstConsumer", "ImportScheduled", "pool md0: passed disk-import"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("harness.log shows no %q for the worker's DataVolume", want)
		}
	}
	if m := regexp.MustCompile(`ImportInProgress [0-9]+\.[0-9]+%`).Find(data); m != nil {
		t.Logf("the importer's own progress seen: %s", m)
	}
}

// checkRegistryUnavailable: under registry-unavailable-once, the importer's first pull got the
// registry's 503, the importer exited with it and the real kubelet started it again; the run
// passed all the same (a suspect while it lasted).
func checkRegistryUnavailable(t *testing.T, _ *lane.Lane, _ *faults.Set, art string, _ []simenv.Observation) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(art, "harness.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "disk-import: ") && strings.Contains(l, "restarts: 1") && strings.Contains(l, "503 Service Unavailable") {
			t.Logf("the importer's restart: %.400s", l)
			return
		}
	}
	t.Errorf("harness.log shows no disk-import line with the importer's restart and the registry's 503")
}

// checkRealComponents: run.json lists the real Node's components, each with a version.
func checkRealComponents(t *testing.T, art string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(art, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &run); err != nil {
		t.Fatal(err)
	}
	have := map[string]string{}
	for _, c := range run.Components {
		have[c.Name] = c.Version
	}
	for _, want := range []string{"kubelet", "containerd", "runc", "qemu", "libvirt", "virt-handler", "virt-launcher", "virt-api", "cdi-importer"} {
		if have[want] == "" {
			t.Errorf("run.json lists no %s with a version (it lists %v)", want, have)
		}
	}
}
