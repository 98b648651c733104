package diag

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// Each VMI's serial console is streamed from its launcher's start into a file of its own, with
// the VMI UID, the launcher start and the read start and end in absolute time; a replacement
// VMI gets a new file and the replaced one's file is kept, its read end filled in. Lines keep
// the guest's relative stamps beside the absolute ones, and a secret the guest prints is scrubbed.
// The management cluster is the sim's: kwok plays the kubelet and serves the container logs.
func TestConsolesAreStreamedPerLauncherAndSurviveReplacement(t *testing.T) {
	tools := cptest.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := world.Start(ctx, world.Options{Tools: tools, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	c := w.Cluster
	testkit.Must(t, c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	testkit.Eventually(ctx, t, "the default ServiceAccount of "+ns, 30*time.Second, testkit.Holds(func() bool {
		var sa corev1.ServiceAccount
		return c.Client.Get(ctx, clientKey(ns, "default"), &sa) == nil
	}))
	testkit.Must(t, c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "canary", Namespace: ns}, StringData: map[string]string{"v": canary}}))

	dir := t.TempDir()
	a, _ := NewArtifacts(dir, NewRedactor(), 20<<20)
	m := NewManifest()
	rec, err := Start(ctx, Options{Artifacts: a, Manifest: m, Management: c, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()
	pn := tenant.For(ns, "pools-abc").Pool("md0")
	rec.WatchPool(pn)

	launch := func(vmi, suffix string, lines ...string) string {
		name := tenant.LauncherPrefix + vmi + "-" + suffix
		// The launcher's owner: a Pod owned by a VMI that does not exist is collected.
		// The chart's and CAPK's labels on the VMI, which KubeVirt copies onto its launcher.
		labels := map[string]string{tenant.LabelClusterName: pn.Cluster(), tenant.LabelDeploymentName: pn.MachineDeployment()}
		owner := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: vmi, Namespace: ns, Labels: labels}}
		if err := c.Client.Create(ctx, owner); err != nil {
			testkit.Must(t, c.Client.Get(ctx, clientKey(ns, vmi), owner))
		}
		for _, ct := range []string{"compute", ConsoleContainer} {
			path, err := w.ContainerLog(ns, name, ct)
			testkit.Must(t, err)
			if ct == ConsoleContainer {
				testkit.Must(t, simenv.WriteContainerLog(path, time.Now(), lines...))
			}
		}
		testkit.Must(t, c.Client.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
				"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": string(owner.UID),
				tenant.LabelClusterName: pn.Cluster(), tenant.LabelDeploymentName: pn.MachineDeployment()},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: vmi,
					UID: owner.UID, Controller: testkit.Ptr(true)}}},
			Spec: corev1.PodSpec{
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{
					{Name: "compute", Image: "virt-launcher", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}},
					{Name: ConsoleContainer, Image: "virt-launcher"},
				}},
		}))
		// The VMI runs once its launcher does, as virt-handler reports it.
		owner.Status.Phase = kubevirtv1.Running
		testkit.Must(t, c.Client.Status().Update(ctx, owner))
		return name
	}
	vmi1 := pn.MachineDeployment() + "-5c7d9-aaaaa"
	pod1 := launch(vmi1, "x1x1x", "[    0.000000] Linux version 6.12", "[    1.234567] talos: machine config token "+canary)
	file1 := "pools/md0/consoles/" + vmi1 + "/" + pod1 + "-0.log"
	testkit.Eventually(ctx, t, "the first console streamed", 30*time.Second, testkit.Holds(func() bool { return fileHas(dir, file1, "[    1.234567] talos") }))

	path1, _ := w.ContainerLog(ns, pod1, ConsoleContainer)
	testkit.Must(t, simenv.WriteContainerLog(path1, time.Now(), "[    2.500000] appended while following"))
	testkit.Eventually(ctx, t, "a line appended while following", 30*time.Second, testkit.Holds(func() bool { return fileHas(dir, file1, "appended while following") }))

	// The Machine is remediated: its VMI stops and its launcher goes, a new VMI comes with a
	// launcher of its own.
	old := &kubevirtv1.VirtualMachineInstance{}
	testkit.Must(t, c.Client.Get(ctx, clientKey(ns, vmi1), old))
	old.Status.Phase = kubevirtv1.Succeeded
	testkit.Must(t, c.Client.Status().Update(ctx, old))
	testkit.Must(t, c.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod1, Namespace: ns}}, clientGrace0()))
	vmi2 := pn.MachineDeployment() + "-5c7d9-bbbbb"
	pod2 := launch(vmi2, "y2y2y", "[    0.000000] Linux version 6.12 (replacement)")
	file2 := "pools/md0/consoles/" + vmi2 + "/" + pod2 + "-0.log"
	testkit.Eventually(ctx, t, "the replacement's console streamed", 30*time.Second, testkit.Holds(func() bool { return fileHas(dir, file2, "replacement") }))
	testkit.Eventually(ctx, t, "the replaced console's read end filled in", 30*time.Second, testkit.Holds(func() bool { return fileHas(dir, file1, "the VMI stopped running") }))

	rec.Stop()
	body := readFile(t, dir, file1)
	for _, re := range []string{
		`(?m)^# vmi uid: [0-9a-f-]{36}$`,
		`(?m)^# launcher: pod ` + pod1 + ` \(uid [0-9a-f-]+\), container guest-console-log, restart 0, node \S+$`,
		`(?m)^# launcher start: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \(epoch \d+\.\d{3} seconds\)$`,
		`(?m)^# read start:     \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \(epoch \d+\.\d{3} seconds\)$`,
		`(?m)^# read end:       \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z +\(epoch +\d+\.\d{3} seconds\) the VMI stopped running`,
		`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z \[    1\.234567\] talos: machine config token \[redacted\]$`,
	} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("console file lacks %s:\n%s", re, body)
		}
	}
	if strings.Contains(body, "still reading") {
		t.Error("the read end was never filled in")
	}
	recs := rec.Consoles()
	if len(recs) != 2 || recs[0].Lines != 3 || recs[0].FirstLine.IsZero() || recs[0].LauncherStart.IsZero() {
		t.Fatalf("console records %+v", recs)
	}
	if !fileHas(dir, "pools/md0/consoles.json", vmi2) {
		t.Error("consoles.json lacks the replacement")
	}
	if err := Scan(dir, canary); err != nil {
		t.Fatal(err)
	}
	for _, e := range m.Entries() {
		if e.Name == "stream consoles" && (e.Status != Complete || e.Items != 2) {
			t.Errorf("manifest entry %+v", e)
		}
	}
}

func readFile(t *testing.T, dir, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
