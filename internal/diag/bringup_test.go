package diag

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// A failed bring-up leaves its error, the Pods that are not ready and a dump; with no
// management cluster at all it leaves the error and says why nothing else could be read.
func TestCollectBringUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	a, _ := NewArtifacts(dir, NewRedactor(), 0)
	m := NewManifest()
	res := CollectBringUp(ctx, BringUpOptions{Artifacts: a, Manifest: m, Phase: "cluster",
		Err: errors.New("kube-apiserver management exited at start"), Budget: Budget{Reserve: 10 * time.Second}})
	if len(res.Entries) != 1 || res.Entries[0].Status != Failed || !strings.Contains(res.Entries[0].Error, "never came up") ||
		res.Evidence[0] != "bring-up.txt" || !fileHas(dir, "bring-up.txt", "bring-up failed in phase cluster") {
		t.Fatalf("without a cluster: %+v", res)
	}

	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "management"})
	c, err := cluster.New("management", api.Admin())
	testkit.Must(t, err)
	testkit.Must(t, c.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}))
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "capi-controller-manager-x", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "capi"}}}}
	testkit.Must(t, c.Client.Create(ctx, p))
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/0 nodes are available"}}}
	testkit.Must(t, c.Client.Status().Update(ctx, p))
	dir = t.TempDir()
	a, _ = NewArtifacts(dir, NewRedactor(), 0)
	res = CollectBringUp(ctx, BringUpOptions{Artifacts: a, Manifest: NewManifest(), Management: c, Phase: "cluster",
		Err: errors.New("Cluster API controllers never became ready"), Budget: Budget{Reserve: 20 * time.Second}})
	got := map[string]Status{}
	for _, e := range res.Entries {
		got[e.Name] = e.Status
	}
	if got["events"] != Complete || got["pods"] != Complete || got["helmreleases"] != Complete || got["resources"] != Complete {
		t.Fatalf("entries %+v", res.Entries)
	}
	if !fileHas(dir, "clusters/management/pods.txt", "Pod default/capi-controller-manager-x on (none): phase Pending; PodScheduled=False Unschedulable") {
		t.Fatal("pods.txt does not name the pending controller")
	}
	if !fileHas(dir, "clusters/management/resources/default/Pod.yaml", "capi-controller-manager-x") {
		t.Fatal("no dump")
	}
	t.Logf("bring-up collectors took %s, evidence %v", res.Duration.Round(time.Millisecond), res.Evidence)
}
