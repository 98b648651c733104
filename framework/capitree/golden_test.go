package capitree

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// -clusterctl names a clusterctl binary (v1.13.6) to rewrite testdata/*.golden with: each file
// is what `clusterctl describe cluster` prints for the tenant goldenTenant creates.
//
//	go test ./framework/capitree -run TestPrintsWhatClusterctlPrints -clusterctl ~/go/bin/clusterctl
var clusterctlBin = flag.String("clusterctl", "", "clusterctl v1.13.6 binary that rewrites testdata/*.golden")

const goldenNS, goldenName = "tenant-e2egold", "gold"

// goldenNow is when the golden files were made; the SINCE column counts to it. Every
// lastTransitionTime is whole years before it, so what clusterctl prints holds from 2026-03-01
// to 2027-03-01; rewriting the files outside that span needs goldenNow moved with them.
var goldenNow = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

// goldenCases are the views compared, each named by its golden file.
var goldenCases = []struct {
	file string
	o    Options
}{
	{"default.golden", Options{}},
	{"no-grouping-echo.golden", Options{NoGrouping: true, Echo: true}},
	{"show-conditions-machinedeployment.golden", Options{ShowConditions: "MachineDeployment"}},
	{"show-conditions-all.golden", Options{ShowConditions: "all", NoGrouping: true, Echo: true}},
	{"show-conditions-nonzero.golden", Options{ShowConditions: "Cluster+,MachineDeployment+,Machine/gold-md1-x-eeeee"}},
	{"no-grouping.golden", Options{NoGrouping: true}},
	{"echo.golden", Options{Echo: true}},
	{"show-conditions-machine-nonzero.golden", Options{ShowConditions: "Machine+", NoGrouping: true}},
}

// The printer draws the tenant goldenTenant writes exactly as clusterctl v1.13.6 does, in every
// view of goldenCases.
func TestPrintsWhatClusterctlPrints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "capitree"})
	c := goldenTenant(t, ctx, api)
	for _, gc := range goldenCases {
		t.Run(strings.TrimSuffix(gc.file, ".golden"), func(t *testing.T) {
			path := filepath.Join("testdata", gc.file)
			if *clusterctlBin != "" {
				writeGolden(t, path, api.AdminKubeconfig, gc.o)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, want, _ := strings.Cut(string(data), "\n---\n")
			o := gc.o
			o.Now = func() time.Time { return goldenNow }
			got, err := Describe(ctx, c.Client, goldenNS, goldenName, o)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%s printed:\n%s\nclusterctl printed:\n%s", Command(goldenNS, goldenName, gc.o), got, want)
			}
		})
	}
}

// trimLines drops the blanks that end each line: clusterctl pads every cell, the last one too;
// the printer and the golden files do not.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// writeGolden runs clusterctl for o and writes its output after a header naming the command.
func writeGolden(t *testing.T, path, kubeconfig string, o Options) {
	t.Helper()
	args := strings.Fields(Command(goldenNS, goldenName, o))[1:]
	args = append(args, "--kubeconfig", kubeconfig)
	cmd := exec.Command(*clusterctlBin, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	head := "# " + Command(goldenNS, goldenName, o) + " --kubeconfig <the test's kube-apiserver>\n" +
		"# clusterctl v1.13.6 (go install sigs.k8s.io/cluster-api/cmd/clusterctl@v1.13.6), on the tenant\n" +
		"# golden_test.go writes, at " + time.Now().UTC().Format(time.RFC3339) + "; blanks at line ends dropped.\n---\n"
	if err := os.WriteFile(path, []byte(head+trimLines(string(out))), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Times of the conditions, whole years before goldenNow.
var (
	y16 = metav1.NewTime(time.Date(2010, 3, 1, 0, 0, 0, 0, time.UTC))
	y13 = metav1.NewTime(time.Date(2013, 3, 1, 0, 0, 0, 0, time.UTC))
	y10 = metav1.NewTime(time.Date(2016, 3, 1, 0, 0, 0, 0, time.UTC))
)

func gcond(typ, status, reason, msg string, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg, LastTransitionTime: at}
}

// v1beta1 is a provider's (Cluster API v1beta1 contract) condition, as unstructured.
func v1beta1(typ, status, severity, reason, msg string, at metav1.Time) map[string]any {
	c := map[string]any{"type": typ, "status": status, "lastTransitionTime": at.UTC().Format(time.RFC3339)}
	for k, v := range map[string]string{"severity": severity, "reason": reason, "message": msg} {
		if v != "" {
			c[k] = v
		}
	}
	return c
}

const longLine = "the pool gold-md0 waits for its Machines to join the tenant cluster, a sentence long enough to wrap at one hundred"

// goldenTenant writes a tenant cluster the way Cluster API and its providers leave it: a
// KubevirtCluster, a KamajiControlPlane (v1beta1 contract), MachineDeployments gold-md0 (four
// Machines, three alike) and gold-md1 (one Machine), through MachineSets, with infrastructure and
// bootstrap objects per Machine.
func goldenTenant(t *testing.T, ctx context.Context, api *controlplane.APIServer) *cluster.Cluster {
	t.Helper()
	c, err := cluster.New("management", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	cptest.InstallFixtureCRDs(t, ctx, c.Client, "Cluster", "MachineDeployment", "MachineSet", "Machine", "MachinePool",
		"KubevirtCluster", "KubevirtMachine", "KamajiControlPlane", "KairosConfig")
	if c, err = cluster.New("management", api.Admin()); err != nil { // fresh discovery
		t.Fatal(err)
	}
	testkit.Must(t, c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: goldenNS}}))
	labels := func(kv ...string) map[string]string {
		l := map[string]string{clusterv1.ClusterNameLabel: goldenName}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	om := func(name string, l map[string]string, owner client.Object) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Namespace: goldenNS, Name: name, Labels: l}
		if owner != nil {
			gvk := owner.GetObjectKind().GroupVersionKind()
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
				Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
		}
		return m
	}

	create(t, ctx, c, provider("infrastructure.cluster.x-k8s.io/v1alpha1", "KubevirtCluster", goldenName, nil,
		map[string]any{"ready": true, "conditions": []any{
			v1beta1("Ready", "True", "", "", "", y16),
			v1beta1("LoadBalancerAvailable", "True", "", "", "", y16)}}))
	create(t, ctx, c, provider("controlplane.cluster.x-k8s.io/v1alpha1", "KamajiControlPlane", goldenName,
		map[string]any{"version": "v1.33.0", "replicas": int64(2)},
		map[string]any{"replicas": int64(2), "readyReplicas": int64(2), "updatedReplicas": int64(2), "conditions": []any{
			v1beta1("Ready", "True", "", "", "", y13),
			v1beta1("KamajiControlPlaneIsReady", "True", "", "", "", y13)}}))

	cl := &clusterv1.Cluster{ObjectMeta: om(goldenName, nil, nil), Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtCluster", Name: goldenName},
		ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KamajiControlPlane", Name: goldenName},
	}}
	create(t, ctx, c, cl)
	cl.Status = clusterv1.ClusterStatus{
		Conditions: []metav1.Condition{
			gcond("Available", "False", "NotAvailable", "* WorkersAvailable:\n  * MachineDeployment gold-md0: 1 available replicas, at least 2 required\n  * MachineDeployment gold-md1: "+longLine, y10),
			gcond("ControlPlaneAvailable", "True", "Available", "", y13),
			gcond("InfrastructureReady", "True", "Ready", "", y16),
			gcond("WorkersAvailable", "False", "NotAvailable", "* MachineDeployment gold-md0: 1 available replicas, at least 2 required", y10),
			gcond("Paused", "False", "NotPaused", "", y16),
			gcond("Deleting", "False", "NotDeleting", "", y16),
			gcond("RollingOut", "False", "NotRollingOut", "", y16),
			gcond("ScalingUp", "False", "NotScalingUp", "", y16),
			gcond("ScalingDown", "False", "NotScalingDown", "", y16),
			gcond("Remediating", "False", "NotRemediating", "", y16),
			gcond("TopologyReconciled", "False", "NotReconciled", "", y16),
			gcond("RemoteConnectionProbe", "True", "ProbeSucceeded", "", y13),
		},
		ControlPlane: &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To[int32](2), Replicas: ptr.To[int32](2), ReadyReplicas: ptr.To[int32](2), UpToDateReplicas: ptr.To[int32](2)},
		Workers:      &clusterv1.WorkersStatus{DesiredReplicas: ptr.To[int32](5), Replicas: ptr.To[int32](5), AvailableReplicas: ptr.To[int32](2), ReadyReplicas: ptr.To[int32](2), UpToDateReplicas: ptr.To[int32](5)},
	}
	testkit.Must(t, c.Client.Status().Update(ctx, cl))

	pools := []struct {
		md       string
		machines []string
	}{{"gold-md0", []string{"aaaaa", "bbbbb", "ccccc", "ddddd"}}, {"gold-md1", []string{"eeeee"}}}
	for _, p := range pools {
		tmpl := clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels(clusterv1.MachineDeploymentNameLabel, p.md)},
			Spec: clusterv1.MachineSpec{ClusterName: goldenName,
				Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KairosConfigTemplate", Name: p.md}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachineTemplate", Name: p.md}}}
		md := &clusterv1.MachineDeployment{ObjectMeta: om(p.md, labels(), nil), Spec: clusterv1.MachineDeploymentSpec{ClusterName: goldenName,
			Replicas: ptr.To(int32(len(p.machines))), Selector: metav1.LabelSelector{MatchLabels: labels(clusterv1.MachineDeploymentNameLabel, p.md)}, Template: tmpl}}
		create(t, ctx, c, md)
		n := int32(len(p.machines))
		md.Status = clusterv1.MachineDeploymentStatus{Replicas: ptr.To(n), ReadyReplicas: ptr.To[int32](1), AvailableReplicas: ptr.To[int32](1), UpToDateReplicas: ptr.To(n),
			Conditions: []metav1.Condition{
				gcond("Available", map[bool]string{true: "False", false: "True"}[n > 1], map[bool]string{true: "NotAvailable", false: "Available"}[n > 1],
					map[bool]string{true: "1 available replicas, at least 2 required", false: ""}[n > 1], y10),
				gcond("MachinesReady", "False", "NotReady", "* Machines gold-md0-x-aaaaa, gold-md0-x-bbbbb, gold-md0-x-ccccc:\n  * NodeHealthy: Waiting for a Node with spec.providerID kubevirt://gold-md0-x-aaaaa to exist", y10),
				gcond("MachinesUpToDate", "True", "UpToDate", "", y13),
				gcond("ScalingUp", "False", "NotScalingUp", "", y16),
				gcond("ScalingDown", "False", "NotScalingDown", "", y16),
				gcond("Remediating", "False", "NotRemediating", "", y16),
				gcond("RollingOut", "False", "NotRollingOut", "", y16),
				gcond("Deleting", "False", "NotDeleting", "", y16),
				gcond("Paused", "False", "NotPaused", "", y16),
			}}
		testkit.Must(t, c.Client.Status().Update(ctx, md))
		md.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("MachineDeployment"))
		ms := &clusterv1.MachineSet{ObjectMeta: om(p.md+"-x", labels(clusterv1.MachineDeploymentNameLabel, p.md), md), Spec: clusterv1.MachineSetSpec{ClusterName: goldenName,
			Replicas: ptr.To(n), Selector: metav1.LabelSelector{MatchLabels: labels(clusterv1.MachineDeploymentNameLabel, p.md)}, Template: tmpl}}
		create(t, ctx, c, ms)
		ms.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("MachineSet"))
		for i, suffix := range p.machines {
			name := p.md + "-x-" + suffix
			ready := i > 0 && i == len(p.machines)-1 && len(p.machines) > 1
			create(t, ctx, c, provider("infrastructure.cluster.x-k8s.io/v1alpha1", "KubevirtMachine", name, map[string]any{},
				map[string]any{"ready": ready, "conditions": []any{v1beta1("Ready", map[bool]string{true: "True", false: "False"}[ready],
					map[bool]string{true: "", false: "Info"}[ready], map[bool]string{true: "", false: "WaitingForBootstrapData"}[ready], "", y10)}}))
			create(t, ctx, c, provider("bootstrap.cluster.x-k8s.io/v1beta2", "KairosConfig", name, map[string]any{"kubernetesVersion": "v1.33.0"},
				map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": y13.UTC().Format(time.RFC3339)}}}))
			m := &clusterv1.Machine{ObjectMeta: om(name, labels(clusterv1.MachineDeploymentNameLabel, p.md, clusterv1.MachineSetNameLabel, ms.Name), ms),
				Spec: clusterv1.MachineSpec{ClusterName: goldenName,
					Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KairosConfig", Name: name}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachine", Name: name}}}
			create(t, ctx, c, m)
			readyCond := gcond("Ready", "Unknown", "ReadyUnknown", "* NodeHealthy: Waiting for a Node", y10)
			if ready {
				readyCond = gcond("Ready", "True", "Ready", "", y13)
			}
			if len(p.machines) == 1 {
				readyCond = gcond("Ready", "False", "NotReady", "* NodeHealthy:\n  * Node.Ready: "+longLine+"\n* InfrastructureReady: "+longLine, y10)
			}
			infraMsg, upToDateMsg, nodeMsg := "", "", map[bool]string{true: "", false: "Waiting for a Node"}[ready]
			if len(p.machines) == 1 { // messages to wrap: indented, with runs of spaces, plain, one long word
				infraMsg = "  indented,   with  runs of spaces: " + longLine
				upToDateMsg = "kubevirt://" + strings.Repeat("x", 110) + " is one word"
				nodeMsg = "plain: " + longLine + "; " + longLine
			}
			m.Status = clusterv1.MachineStatus{Phase: "Provisioned", Conditions: []metav1.Condition{
				gcond("Available", map[bool]string{true: "True", false: "False"}[ready], map[bool]string{true: "Available", false: "NotReady"}[ready], "", y10),
				readyCond,
				gcond("UpToDate", "True", "UpToDate", upToDateMsg, y13),
				gcond("BootstrapConfigReady", "True", "Ready", "", y13),
				gcond("InfrastructureReady", "True", "Ready", infraMsg, y13),
				gcond("NodeHealthy", map[bool]string{true: "True", false: "Unknown"}[ready], map[bool]string{true: "NodeHealthy", false: "NodeDoesNotExist"}[ready],
					nodeMsg, y10),
				gcond("Deleting", "False", "NotDeleting", "", y16),
				gcond("Paused", "False", "NotPaused", "", y16),
			}}
			if ready { // which conditions a non-zero filter hides
				m.Status.Conditions = append(m.Status.Conditions,
					gcond("Updating", "False", "NotUpdating", "", y16),
					gcond("OwnerRemediated", "False", "NotRemediated", "", y16),
					gcond("HealthCheckSucceeded", "False", "Unhealthy", "", y16),
					gcond("MachinesUpdating", "False", "NotUpdating", "", y16),
					gcond("Remediating", "False", "NotRemediating", "", y16),
					gcond("RollingOut", "False", "NotRollingOut", "", y16),
					gcond("ScalingUp", "False", "NotScalingUp", "", y16),
					gcond("ScalingDown", "False", "NotScalingDown", "", y16),
					gcond("NodeReady", "True", "Ready", "kubelet is posting ready status", y13))
			}
			testkit.Must(t, c.Client.Status().Update(ctx, m))
		}
	}
	return c
}

func provider(apiVersion, kind, name string, spec, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": goldenNS, "labels": map[string]any{clusterv1.ClusterNameLabel: goldenName}}}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// create writes obj, then its status (a status subresource ignores it on create).
func create(t *testing.T, ctx context.Context, c *cluster.Cluster, obj client.Object) {
	t.Helper()
	u, ok := obj.(*unstructured.Unstructured)
	var status any
	if ok {
		status = u.Object["status"]
	}
	testkit.Must(t, c.Client.Create(ctx, obj))
	if ok && status != nil {
		u.Object["status"] = status
		testkit.Must(t, c.Client.Status().Update(ctx, u))
	}
}
