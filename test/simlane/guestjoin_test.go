package simlane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// guestJoined is what the run showed of a worker that joined on the real Node: its VMI as
// KubeVirt ran it, and the tenant Node and workload pod as the tenant's apiserver had them once
// the pod ran.
type guestJoined struct {
	vmi, namespace, firmwareUUID string
	node                         *corev1.Node
	pod                          *corev1.Pod
}

// joined records, for an md0 VMI Running on the real Node, its tenant Node and workload pod
// once the pod runs: read from the tenant's apiserver through the admin kubeconfig Kamaji keeps
// in the management cluster.
func (w *realNodeWatch) joined(ctx context.Context, cs kubernetes.Interface, vmi unstructured.Unstructured) {
	w.mu.Lock()
	done := w.join != nil && w.join.vmi == vmi.GetName()
	w.mu.Unlock()
	if done {
		return
	}
	cluster := vmi.GetLabels()[clusterv1.ClusterNameLabel]
	s, err := cs.CoreV1().Secrets(vmi.GetNamespace()).Get(ctx, cluster+"-admin-kubeconfig", metav1.GetOptions{})
	if err != nil {
		return
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[tenant.AdminKubeconfigKey])
	if err != nil {
		return
	}
	tc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return
	}
	n, err := tc.CoreV1().Nodes().Get(ctx, vmi.GetName(), metav1.GetOptions{})
	if err != nil {
		return
	}
	pod, err := tc.CoreV1().Pods(tenant.WorkloadNamespace).Get(ctx, tenant.WorkloadPod(n.Name), metav1.GetOptions{})
	if err != nil || pod.Status.Phase != corev1.PodRunning {
		return
	}
	uuid, _, _ := unstructured.NestedString(vmi.Object, "spec", "domain", "firmware", "uuid")
	w.mu.Lock()
	w.join = &guestJoined{vmi: vmi.GetName(), namespace: vmi.GetNamespace(), firmwareUUID: uuid, node: n, pod: pod}
	w.mu.Unlock()
}

// checkGuestJoin: the worker's Node was registered by the kubelet inside its VM. Its systemUUID
// is the VMI's firmware UUID (the kubelet reads it from the guest's DMI), its kernel the one the
// guest's console printed at boot, its providerID and cluster-namespace annotation as CAPK and
// Cluster API set them, the workload pod ran on it; and the sim's host-side guest joined
// nothing: for every md0 VMI it said the guest joins by itself.
func (w *realNodeWatch) checkGuestJoin(t *testing.T, art string) {
	t.Helper()
	w.mu.Lock()
	j := w.join
	w.mu.Unlock()
	if j == nil {
		t.Fatalf("no md0 worker was seen with its tenant Node and a Running workload pod on it (last: %s)", w.last)
	}
	info := j.node.Status.NodeInfo
	t.Logf("Node %s: systemUUID %s, kernel %s, kubelet %s, OS %q, providerID %s; workload pod %s on %s, image %s",
		j.node.Name, info.SystemUUID, info.KernelVersion, info.KubeletVersion, info.OSImage, j.node.Spec.ProviderID,
		j.pod.Name, j.pod.Spec.NodeName, containerImageID(j.pod))
	if j.firmwareUUID == "" || info.SystemUUID != j.firmwareUUID {
		t.Errorf("Node %s has systemUUID %q; VMI %s's firmware UUID is %q", j.node.Name, info.SystemUUID, j.vmi, j.firmwareUUID)
	}
	if j.node.Spec.ProviderID != tenant.ProviderID(j.vmi) {
		t.Errorf("Node %s has providerID %q, want %q", j.node.Name, j.node.Spec.ProviderID, tenant.ProviderID(j.vmi))
	}
	if got := j.node.Annotations[tenant.AnnotationClusterNamespace]; got != j.namespace {
		t.Errorf("Node %s has annotation %s=%q, want %q", j.node.Name, tenant.AnnotationClusterNamespace, got, j.namespace)
	}
	if j.pod.Spec.NodeName != j.node.Name {
		t.Errorf("the workload pod %s ran on %q, not on Node %s", j.pod.Name, j.pod.Spec.NodeName, j.node.Name)
	}
	// The guest's containerd pulled the lane's workload by its digest.
	if image := j.pod.Spec.Containers[0].Image; len(j.pod.Status.ContainerStatuses) != 1 ||
		!strings.HasSuffix(j.pod.Status.ContainerStatuses[0].ImageID, image[strings.LastIndex(image, "@")+1:]) {
		t.Errorf("the workload pod's container ran %s, not the lane's %s", containerImageID(j.pod), image)
	}
	consoles, _ := filepath.Glob(filepath.Join(art, "pools", "md0", "consoles", j.vmi, "*.log"))
	printed := false
	for _, f := range consoles {
		b, _ := os.ReadFile(f)
		printed = printed || strings.Contains(string(b), "Linux version "+info.KernelVersion+" ")
	}
	if !printed {
		t.Errorf("no console of VMI %s (%d read) printed the Node's kernel %q at boot", j.vmi, len(consoles), info.KernelVersion)
	}
	checkNoHostSideJoin(t, art)
}

// checkNoHostSideJoin: the sim's host-side guest (internal/sim/guest) logged, for each md0 VMI
// it saw, that the guest joins by itself, and logged nothing else.
func checkNoHostSideJoin(t *testing.T, art string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(art, "substrate", "guests.log"))
	if err != nil {
		t.Fatal(err)
	}
	var itself, other []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		switch {
		case l == "":
		case strings.Contains(l, "-md0-") && strings.HasSuffix(l, "the guest joins by itself; no host-side join"):
			itself = append(itself, l)
		default:
			other = append(other, l)
		}
	}
	if len(itself) == 0 || len(other) > 0 {
		t.Errorf("substrate/guests.log: %d VMI(s) left to join by themselves, and %d other line(s): %s",
			len(itself), len(other), strings.Join(other, "\n"))
	}
}

func containerImageID(p *corev1.Pod) string {
	var ids []string
	for _, c := range p.Status.ContainerStatuses {
		ids = append(ids, fmt.Sprintf("%s (%s)", c.Image, c.ImageID))
	}
	return strings.Join(ids, ", ")
}
