package realupstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// diskDV is a worker disk as the Cozystack v1.6.1 Kubernetes chart writes it: the storage: form
// with no access or volume mode, populators off, on class local.
const diskDV = `apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: %s
  namespace: default
  annotations:
    cdi.kubevirt.io/storage.usePopulator: "false"
spec:
  source:
    http:
      url: https://factory.talos.dev/image/x/v1.11.5/openstack-amd64.raw.xz
  storage:
    storageClassName: local
    resources:
      requests:
        storage: 20Gi
`

// The real cdi-controller refuses a chart-shaped disk on a rancher.io/local-path class whose
// StorageProfile offers no access mode, in its own words, and accepts it once the harness's
// StorageProfile (internal/install, the code both lanes use) names the claim properties: the
// claim then carries them, written by cdi-controller, and the DataVolume waits for its first
// consumer. The StorageProfile gate says the same before any disk does.
func TestCDIControllerJudgesTheHarnessStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a management world and cdi-controller")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := findBuild(t)
	w := startWorld(ctx, t, b)
	ctl, err := realupstream.StartCDIController(ctx, b, w.Cluster, realupstream.Options{
		Dir: controllerDir(t, "cdi-controller"), Kubeconfig: w.API.AdminKubeconfig, PodCIDR: world.PodCIDR})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Stop(5 * time.Second) })
	logController(t, ctl)
	c := freshClient(t, w)
	a, err := install.NewApplier(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, install.StorageClasses()); err != nil {
		t.Fatal(err)
	}

	// Without the harness's StorageProfiles: CDI's own table knows no rancher.io/local-path.
	gctx, gcancel := context.WithTimeout(ctx, 30*time.Second)
	err = install.StorageProfilesAccept(gctx, a.Dynamic(), install.GateOptions{})
	gcancel()
	if err == nil || !strings.Contains(err.Error(), "has no access mode") {
		t.Fatalf("the StorageProfile gate without the harness's profiles: %v, want it to say the profile has no access mode", err)
	}
	create(ctx, t, c, fmt.Sprintf(diskDV, "refused"))
	// CDI's words reach the DataVolume's Bound condition (pkg/controller/datavolume/controller-base.go
	// lines 517-523, 884-890) and an ErrClaimNotValid event.
	want := "no accessMode specified in StorageProfile local"
	waitEvent(ctx, t, c, "refused", "ErrClaimNotValid")
	var bound string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		dv, err := get(ctx, c, "cdi.kubevirt.io/v1beta1", "DataVolume", "default", "refused")
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(dv.Object, "status", "conditions")
		for _, x := range conds {
			m, _ := x.(map[string]any)
			if m["type"] == "Bound" {
				bound = fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
				return m["reason"] == "ErrClaimNotValid" && m["message"] == want, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("DataVolume refused: Bound condition %q, want False ErrClaimNotValid: %s", bound, want)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "refused"}, &pvc); err == nil {
		t.Fatalf("CDI created claim refused without an access mode: %v", pvc.Spec)
	}

	// With them.
	if err := a.Apply(ctx, install.StorageProfiles()); err != nil {
		t.Fatal(err)
	}
	if err := install.StorageProfilesAccept(ctx, a.Dynamic(), install.GateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(ctx, t, c, fmt.Sprintf(diskDV, "accepted"))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "accepted"}, &pvc) == nil, nil
	})
	if err != nil {
		t.Fatalf("CDI created no claim for DataVolume accepted: %v", err)
	}
	if len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce || pvc.Spec.VolumeMode == nil || *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("claim accepted: access %v, volume mode %v; want ReadWriteOnce and Filesystem from the StorageProfile", pvc.Spec.AccessModes, pvc.Spec.VolumeMode)
	}
	if !managedBy(&pvc, "cdi-controller") {
		t.Errorf("claim accepted: managedFields %v name no cdi-controller", managers(&pvc))
	}
	dv, err := get(ctx, c, "cdi.kubevirt.io/v1beta1", "DataVolume", "default", "accepted")
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		dv, err = get(ctx, c, "cdi.kubevirt.io/v1beta1", "DataVolume", "default", "accepted")
		return err == nil && dv.Object["status"] != nil && dv.Object["status"].(map[string]any)["phase"] == "WaitForFirstConsumer", nil
	})
	if err != nil {
		t.Errorf("DataVolume accepted: status %v, want phase WaitForFirstConsumer (class local binds on first consumer, HonorWaitForFirstConsumer on)", dv.Object["status"])
	}
}

// waitEvent waits for an event of reason on object name and returns its message.
func waitEvent(ctx context.Context, t *testing.T, c *cluster.Cluster, name, reason string) string {
	t.Helper()
	msg := ""
	testkit.Eventually(ctx, t, "a "+reason+" event on "+name, time.Minute, func() (bool, string) {
		evs, err := c.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Reason == reason {
				msg = e.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d other events", len(evs.Items))
	})
	return msg
}
