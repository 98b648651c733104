package diag

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// A pool that failed because a platform component was down has the platform's Pods and Events
// as its first evidence: the crash-looping Pod with its restarts, and the kubelet's BackOff.
func TestAPlatformFailuresEvidenceIsThePlatformsPodsAndEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newTwoClusters(t, ctx)
	dir, _, _, rec := w.startRecorder(t, ctx)
	defer rec.Stop()
	c := w.mgmt.Client
	testkit.Must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cozy-kubevirt"}}))
	testkit.Must(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "cozy-kubevirt"}}))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-controller-7d9f", Namespace: "cozy-kubevirt", Labels: map[string]string{"kubevirt.io": "virt-controller"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "virt-controller", Image: "quay.io/kubevirt/virt-controller:v1.8.4"}}}}
	testkit.Must(t, c.Create(ctx, pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "virt-controller", RestartCount: 4,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}
	testkit.Must(t, c.Status().Update(ctx, pod))
	now := metav1.Now()
	testkit.Must(t, c.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "virt-controller-7d9f.1", Namespace: "cozy-kubevirt"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "cozy-kubevirt", Name: pod.Name},
		Type:           corev1.EventTypeWarning, Reason: "BackOff", Message: "Back-off restarting failed container virt-controller", FirstTimestamp: now, LastTimestamp: now, Count: 3}))

	res := rec.Collect(ctx, CollectOptions{Budget: Budget{Reserve: 30 * time.Second}, Pools: []tenant.PoolNames{w.pn}, Class: verdict.Platform})
	// The platform's files come first: its Pods' logs and summary, then its Events.
	platform := 0
	for _, p := range res.Evidence {
		if !strings.HasPrefix(p, "clusters/management/logs/cozy-kubevirt/") && p != "clusters/management/pods.txt" && p != "clusters/management/events.txt" {
			break
		}
		platform++
	}
	if !slices.Contains(res.Evidence[:platform], "clusters/management/pods.txt") || !slices.Contains(res.Evidence[:platform], "clusters/management/events.txt") {
		t.Fatalf("evidence %v: want the platform's Pods and Events before anything of the pool's", res.Evidence)
	}
	for file, want := range map[string]string{"pods.txt": "Pod cozy-kubevirt/virt-controller-7d9f", "events.txt": "BackOff"} {
		data, err := os.ReadFile(filepath.Join(dir, "clusters", "management", file))
		if err != nil || !strings.Contains(string(data), want) {
			t.Errorf("%s (%v) lacks %q:\n%s", file, err, want, data)
		}
	}
}
