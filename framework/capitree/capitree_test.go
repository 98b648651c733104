package capitree

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/tree"
)

var now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func cond(t, status, reason, msg string, ago time.Duration) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(now.Add(-ago))}
}

func meta(name, uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "tenant-e2eab1", Name: name, UID: types.UID(uid)}
}

// A tenant cluster as the sim leaves it after guest-join-rejected@md0: the tree clusterctl
// describe draws for it, in the same columns, prefixes, condition and grouping (the text was
// checked against clusterctl v1.13.6 describe on the sim's kept tenant; SINCE counts to now).
func TestATenantClusterPrintsAsClusterctlDescribes(t *testing.T) {
	c := &clusterv1.Cluster{TypeMeta: metav1.TypeMeta{Kind: "Cluster", APIVersion: clusterv1.GroupVersion.String()},
		ObjectMeta: meta("kubernetes-pools-ab1", "c"),
		Status: clusterv1.ClusterStatus{
			Conditions: []metav1.Condition{cond("Available", "False", "NotAvailable",
				"* WorkersAvailable:\n  * MachineDeployment kubernetes-pools-ab1-md0: 0 available replicas, at least 1 required", 22*time.Second)},
			ControlPlane: &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To[int32](2), Replicas: ptr.To[int32](2), ReadyReplicas: ptr.To[int32](2), UpToDateReplicas: ptr.To[int32](2)},
			Workers:      &clusterv1.WorkersStatus{DesiredReplicas: ptr.To[int32](2), Replicas: ptr.To[int32](2), AvailableReplicas: ptr.To[int32](0), ReadyReplicas: ptr.To[int32](0), UpToDateReplicas: ptr.To[int32](2)},
		}}
	ot := tree.NewObjectTree(c, tree.ObjectTreeOptions{Grouping: true, ShowOtherConditions: "MachineDeployment/kubernetes-pools-ab1-md0"})
	infra := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "KubevirtCluster",
		"metadata": map[string]any{"name": "kubernetes-pools-ab1", "namespace": "tenant-e2eab1", "uid": "i"}}}
	ot.Add(c, infra, tree.ObjectMetaName("ClusterInfrastructure"))
	cp := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1", "kind": "KamajiControlPlane",
		"metadata": map[string]any{"name": "kubernetes-pools-ab1", "namespace": "tenant-e2eab1", "uid": "cp",
			"annotations": map[string]any{tree.ObjectContractAnnotation: "ControlPlane", tree.ObjectContractVersionAnnotation: "v1beta1"}},
		"spec": map[string]any{"replicas": int64(2)},
		"status": map[string]any{"replicas": int64(2), "readyReplicas": int64(2), "updatedReplicas": int64(2),
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "NoReasonReported", "lastTransitionTime": now.Add(-30 * time.Second).Format(time.RFC3339)}}}}}
	ot.Add(c, cp, tree.ObjectMetaName("ControlPlane"))
	workers := tree.VirtualObject("tenant-e2eab1", "WorkerGroup", "Workers")
	ot.Add(c, workers)
	md := &clusterv1.MachineDeployment{TypeMeta: metav1.TypeMeta{Kind: "MachineDeployment", APIVersion: clusterv1.GroupVersion.String()},
		ObjectMeta: meta("kubernetes-pools-ab1-md0", "md"), Spec: clusterv1.MachineDeploymentSpec{Replicas: ptr.To[int32](2)},
		Status: clusterv1.MachineDeploymentStatus{Replicas: ptr.To[int32](2), AvailableReplicas: ptr.To[int32](0), ReadyReplicas: ptr.To[int32](0), UpToDateReplicas: ptr.To[int32](2),
			Conditions: []metav1.Condition{cond("Available", "False", "NotAvailable", "0 available replicas, at least 1 required", 23*time.Second),
				cond("Paused", "False", "NotPaused", "", 33*time.Second)}}}
	ot.Add(workers, md, tree.GroupingObject(true))
	for _, name := range []string{"kubernetes-pools-ab1-md0-x-aaaaa", "kubernetes-pools-ab1-md0-x-bbbbb"} {
		m := &clusterv1.Machine{TypeMeta: metav1.TypeMeta{Kind: "Machine", APIVersion: clusterv1.GroupVersion.String()}, ObjectMeta: meta(name, name),
			Status: clusterv1.MachineStatus{Conditions: []metav1.Condition{
				cond("Available", "False", "NotReady", "", 20*time.Second),
				cond("Ready", "Unknown", "ReadyUnknown", "* NodeHealthy: Waiting for a Node", 15*time.Second),
				cond("UpToDate", "True", "UpToDate", "", 20*time.Second)}}}
		ot.Add(md, m)
	}
	var b strings.Builder
	if err := Print(&b, ot, now); err != nil {
		t.Fatal(err)
	}
	want := `NAME                                                            REPLICAS AVAILABLE READY UP TO DATE STATUS   REASON            SINCE MESSAGE
Cluster/kubernetes-pools-ab1                                    4/4      0         2     4          False    NotAvailable      22s   * WorkersAvailable:
│                                                                                                                                      * MachineDeployment kubernetes-pools-ab1-md0: 0 available replicas, at least 1 required
├─ClusterInfrastructure - KubevirtCluster/kubernetes-pools-ab1
├─ControlPlane - KamajiControlPlane/kubernetes-pools-ab1        2/2                2     2          True     NoReasonReported  30s
└─Workers
  └─MachineDeployment/kubernetes-pools-ab1-md0                  2/2      0         0     2
    │           ├─Available                                                                         False    NotAvailable      23s   0 available replicas, at least 1 required
    │           └─Paused                                                                            False    NotPaused         33s
    └─2 Machines...                                                      0         0     2          Unknown  ReadyUnknown      15s   See kubernetes-pools-ab1-md0-x-aaaaa, kubernetes-pools-ab1-md0-x-bbbbb
`
	if got := b.String(); got != want {
		t.Fatalf("printed:\n%s\nwant:\n%s", got, want)
	}
}

// Command is the clusterctl command line of the same view.
func TestCommandNamesTheSameView(t *testing.T) {
	got := Command("tenant-e2eab1", "kubernetes-pools-ab1", Options{ShowConditions: "MachineDeployment/md", Echo: true, NoGrouping: true})
	if got != "clusterctl describe cluster kubernetes-pools-ab1 -n tenant-e2eab1 --show-conditions MachineDeployment/md --echo --grouping=false" {
		t.Fatal(got)
	}
}

// A message line longer than 100 characters breaks between words, the rest hanging under the
// bullet's text, as clusterctl v1.13.6 prints it.
func TestAMessageWrapsAt100LikeClusterctl(t *testing.T) {
	msg := "* NodeHealthy: Waiting for a Node with spec.providerID kubevirt://kubernetes-pools-0ckb5-md0-4lj62-2c7hk to exist"
	want := "* NodeHealthy: Waiting for a Node with spec.providerID\n  kubevirt://kubernetes-pools-0ckb5-md0-4lj62-2c7hk to exist"
	if got := strings.Join(wrapMessage(msg, messageWidth), "\n"); got != want {
		t.Fatalf("%q", got)
	}
}
