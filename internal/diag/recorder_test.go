package diag

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

const ns = "tenant-e2eabc"

// twoClusters is a management and a tenant apiserver, real, with objects written the way the
// platform, Cluster API, KubeVirt and the kubelet would write them.
type twoClusters struct {
	mgmt, tenant *cluster.Cluster
	pn           tenant.PoolNames
}

func newTwoClusters(t *testing.T, ctx context.Context) *twoClusters {
	t.Helper()
	mapi := cptest.APIServer(t, controlplane.APIServerOptions{Name: "management"})
	tapi := cptest.APIServer(t, controlplane.APIServerOptions{Name: "tenant"})
	w := &twoClusters{pn: tenant.For(ns, "pools-abc").Pool("md0")}
	var err error
	if w.mgmt, err = cluster.New("management", mapi.Admin()); err != nil {
		t.Fatal(err)
	}
	if w.tenant, err = cluster.New("tenant", tapi.Admin()); err != nil {
		t.Fatal(err)
	}
	cptest.InstallFixtureCRDs(t, ctx, w.mgmt.Client, "Machine", "MachineHealthCheck", "VirtualMachineInstance")
	if w.mgmt, err = cluster.New("management", mapi.Admin()); err != nil { // fresh discovery
		t.Fatal(err)
	}
	testkit.Must(t, w.mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	// What kube-controller-manager would create in a new namespace.
	testkit.Must(t, w.mgmt.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}))
	// The sim plants the canary in the tenant namespace and in the tenant cluster.
	for _, c := range []*cluster.Cluster{w.mgmt, w.tenant} {
		testkit.Must(t, c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "canary", Namespace: map[bool]string{true: ns, false: "default"}[c == w.mgmt]},
			StringData: map[string]string{"value": canary}}))
	}
	return w
}

// startRecorder starts a recorder on the management cluster, writing to a fresh folder (dir,
// its Artifacts a) and manifest m.
func (w *twoClusters) startRecorder(t *testing.T, ctx context.Context) (dir string, a *Artifacts, m *Manifest, rec *Recorder) {
	t.Helper()
	dir = t.TempDir()
	a, err := NewArtifacts(dir, NewRedactor(), 20<<20)
	if err != nil {
		t.Fatal(err)
	}
	m = NewManifest()
	if rec, err = Start(ctx, Options{Artifacts: a, Manifest: m, Process: "kubernetes", Management: w.mgmt, Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	return dir, a, m, rec
}

// A failing pool leaves, within the diagnostics reserve: its timeline and events streamed from
// its start, the Warning that explains it, Node names against VMI names, the tenant's CSRs and
// kubelet configuration, and dumps of both clusters; every collector in the manifest; and the
// canary nowhere, though it is in an event message, a Pod's environment and a ConfigMap.
func TestRecorderStreamsAndCollectsWithoutLeakingSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newTwoClusters(t, ctx)
	dir, a, m, rec := w.startRecorder(t, ctx)
	defer rec.Stop()
	rec.WatchPool(w.pn)
	testkit.Must(t, rec.SetTenant(ctx, Tenant, w.pn.Names, w.tenant))

	vmi := w.pn.MachineDeployment() + "-7d9f8c6b5x-abcde"
	launcher := tenant.LauncherPrefix + vmi + "-q2w3e"
	// The launcher's owner: this cluster serves no VMIs, so the owner is named, not created.
	owner := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: vmi, Namespace: ns, UID: types.UID("uid-of-" + vmi)}}
	pod := &corev1.Pod{
		// KubeVirt copies the VMI's labels onto its launcher (kubevirt/kubevirt v1.8.4
		// pkg/virt-controller/services/template.go:1607-1619): the chart's deployment-name and
		// CAPK's cluster-name among them.
		ObjectMeta: metav1.ObjectMeta{Name: launcher, Namespace: ns, Labels: map[string]string{"kubevirt.io/created-by": string(owner.UID), "kubevirt.io": "virt-launcher",
			tenant.LabelClusterName: w.pn.Cluster(), tenant.LabelDeploymentName: w.pn.MachineDeployment()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: vmi,
				UID: owner.UID, Controller: testkit.Ptr(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "compute", Image: "virt-launcher", Env: []corev1.EnvVar{{Name: "LEAK", Value: canary}}},
			{Name: ConsoleContainer, Image: "virt-launcher"},
		}},
	}
	testkit.Must(t, w.mgmt.Client.Create(ctx, pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/1 nodes are available: 1 Insufficient memory.", LastTransitionTime: metav1.Now()}}}
	testkit.Must(t, w.mgmt.Client.Status().Update(ctx, pod))
	now := metav1.Now()
	testkit.Must(t, w.mgmt.Client.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: launcher + ".1", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: launcher},
		Type:           corev1.EventTypeWarning, Reason: "FailedScheduling", Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Message: "0/1 nodes are available: 1 Insufficient memory. (debug " + canary + ")", Source: corev1.EventSource{Component: "default-scheduler"},
	}))
	machine := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
		"metadata": map[string]any{"name": vmi, "namespace": ns, "labels": map[string]any{tenant.LabelClusterName: w.pn.Cluster(), tenant.LabelDeploymentName: w.pn.MachineDeployment()}},
		"spec": map[string]any{"clusterName": w.pn.Release(), "bootstrap": map[string]any{"dataSecretName": "x"},
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtMachine", "name": vmi}},
	}}
	testkit.Must(t, w.mgmt.Client.Create(ctx, machine))
	// The guest registered under another name than its VMI.
	testkit.Must(t, w.tenant.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal-4f2a", Labels: map[string]string{"kubernetes.io/hostname": "metal-4f2a"}}}))
	testkit.Must(t, w.tenant.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tenant.KubeletConfigName, Namespace: tenant.KubeletConfigNamespace},
		Data: map[string]string{tenant.KubeletConfigKey: "kind: KubeletConfiguration\nclusterDNS: []\n# " + canary + "\n"}}))
	testkit.Must(t, w.tenant.Client.Create(ctx, &certv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr-metal"},
		Spec: certv1.CertificateSigningRequestSpec{Request: csrPEM(t), SignerName: "kubernetes.io/kube-apiserver-client-kubelet",
			Usages: []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}}}))

	testkit.Eventually(ctx, t, "the launcher's Unschedulable condition in the pool timeline", 30*time.Second, testkit.Holds(func() bool {
		return fileHas(dir, "pools/md0/timeline.jsonl", "Insufficient memory")
	}))
	testkit.Eventually(ctx, t, "the FailedScheduling event in the pool's events", 30*time.Second, testkit.Holds(func() bool {
		return fileHas(dir, "pools/md0/events.jsonl", "FailedScheduling")
	}))
	testkit.Eventually(ctx, t, "the tenant Node in the tenant timeline", 30*time.Second, testkit.Holds(func() bool {
		return fileHas(dir, "clusters/tenant/timeline.jsonl", "metal-4f2a")
	}))

	res := rec.Collect(ctx, CollectOptions{Budget: Budget{Reserve: 30 * time.Second}, Pools: []tenant.PoolNames{w.pn},
		Class: verdict.VMUnschedulable})
	t.Logf("collectors took %s", res.Duration.Round(time.Millisecond))
	status := map[string]Entry{}
	for _, e := range res.Entries {
		status[e.Name+" "+e.Scope] = e
		t.Logf("%-14s %-20s %-9s %6.3fs %7d bytes %s %s", e.Name, e.Scope, e.Status, e.Duration.D().Seconds(), e.Bytes, e.Error, strings.Join(e.Notes, "; "))
	}
	for _, name := range []string{"events pool md0", "machines pool md0", "identity pool md0", "tenant-join cluster tenant",
		"consoles pool md0", "previous-logs clusters", "resources cluster management", "resources cluster tenant"} {
		if e, ok := status[name]; !ok || e.Status != Complete {
			t.Errorf("collector %s: %+v", name, e)
		}
	}
	// The DataVolume and VMI kinds are not installed here: the collectors that need them say so.
	if e := status["disk-import pool md0"]; e.Status != Failed || !strings.Contains(e.Error, "DataVolume cdi.kubevirt.io/v1beta1: kind not served") {
		t.Errorf("disk-import without the DataVolume kind: %+v", e)
	}
	if len(res.Evidence) == 0 || res.Evidence[0] != "pools/md0/events.txt" {
		t.Errorf("evidence for vm-unschedulable should start with the pool's events: %v", res.Evidence)
	}
	for file, want := range map[string]string{
		"pools/md0/events.txt":                                 "FailedScheduling",
		"pools/md0/machines.txt":                               "Pod " + launcher + ": phase Pending",
		"pools/md0/identity.txt":                               "Node metal-4f2a: tied to no VMI of any pool",
		"clusters/tenant/kubelet-config.yaml":                  "# clusterDNS: EMPTY",
		"clusters/tenant/csrs.txt":                             "csr-metal: signer kubernetes.io/kube-apiserver-client-kubelet",
		"clusters/management/resources/" + ns + "/Pod.yaml":    launcher,
		"clusters/tenant/resources/_cluster/Node.yaml":         "metal-4f2a",
		"clusters/tenant/resources/kube-system/ConfigMap.yaml": "clusterDNS: []",
	} {
		if !fileHas(dir, file, want) {
			t.Errorf("%s does not hold %q", file, want)
		}
	}
	// A later failure of the same pool, and one about no pool, reuse what was collected: no
	// collector runs twice, the manifest holds each once, the evidence is the same.
	before := len(m.Entries())
	again := rec.Collect(ctx, CollectOptions{Budget: Budget{Reserve: 30 * time.Second}, Pools: []tenant.PoolNames{w.pn}, Class: verdict.VMUnschedulable})
	none := rec.Collect(ctx, CollectOptions{Budget: Budget{Reserve: 30 * time.Second}, Class: verdict.ProductAssertion})
	if len(m.Entries()) != before || strings.Join(again.Evidence, ",") != strings.Join(res.Evidence, ",") || len(none.Entries) != 4 {
		t.Errorf("collecting again: %d manifest entries (was %d), %d entries for a failure about no pool", len(m.Entries()), before, len(none.Entries))
	}
	for _, f := range []string{"clusters/management/resources/" + ns + "/Secret.yaml", "clusters/tenant/resources/default/Secret.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was dumped: Secrets never are", f)
		}
	}
	rec.Stop()
	testkit.Must(t, m.Write(filepath.Join(dir, "manifest.json")))
	entries, err := ReadManifest(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	streams := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name, "stream ") {
			streams++
		}
	}
	if streams != 7 { // events and timeline of 2 clusters and 1 pool, and the pool's consoles
		t.Errorf("manifest has %d stream entries, want 7: %+v", streams, entries)
	}
	if err := Scan(dir, canary); err != nil {
		t.Fatal(err)
	}
	t.Logf("artifacts: %d bytes", a.Written())
}

func fileHas(dir, rel, want string) bool {
	data, err := os.ReadFile(filepath.Join(dir, rel))
	return err == nil && strings.Contains(string(data), want)
}

// With two conformance clusters, a failing pool's join is read in its own tenant cluster: the
// other cluster's CSRs, kubelet configuration and dumps are no evidence of it.
func TestAPoolsEvidenceIsOfItsOwnCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newTwoClusters(t, ctx)
	_, _, _, rec := w.startRecorder(t, ctx)
	defer rec.Stop()
	other := tenant.For(ns, "classes-abc").Pool("kairos")
	rec.WatchPool(w.pn)
	rec.WatchPool(other)
	testkit.Must(t, rec.SetTenant(ctx, Tenant, w.pn.Names, w.tenant))
	testkit.Must(t, rec.SetTenant(ctx, "tenant-classes", other.Names, w.tenant))

	collected := func(pn tenant.PoolNames) (map[string]bool, []string) {
		res := rec.Collect(ctx, CollectOptions{Budget: Budget{Reserve: 30 * time.Second}, Pools: []tenant.PoolNames{pn},
			Class: verdict.JoinRejected})
		ran := map[string]bool{}
		for _, e := range res.Entries {
			ran[e.Name+" "+e.Scope] = true
		}
		return ran, res.Evidence
	}
	ran, evidence := collected(w.pn)
	if !ran["tenant-join cluster tenant"] || ran["tenant-join cluster tenant-classes"] {
		t.Errorf("pool md0 of cluster tenant: tenant-join ran for %v", ran)
	}
	if !slices.Contains(evidence, "clusters/tenant/csrs.txt") {
		t.Errorf("pool md0's evidence lacks its own cluster's CSRs: %v", evidence)
	}
	for _, p := range evidence {
		if strings.HasPrefix(p, "clusters/tenant-classes/") {
			t.Errorf("pool md0's evidence holds %s, of the other cluster", p)
		}
	}
	if ran, _ = collected(other); !ran["tenant-join cluster tenant-classes"] {
		t.Errorf("pool kairos of cluster tenant-classes: tenant-join ran for %v", ran)
	}
}
