package node_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/sim/cdi"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// diskImport is the worker's disk imported by CDI's real importer on the real Node: the
// DataVolume the VMI boots from, and what checks the import once the VMI ran.
type diskImport struct {
	// DataVolume is the DataVolume's name, in namespace default.
	DataVolume string
	check      func()
	// checkDeleted deletes the DataVolume and waits until its volume's folder is gone.
	checkDeleted func()
}

// startDiskImport runs the real cdi-controller (in namespaces of its own, its dials to the real
// Node's pods relayed to them) with the platform's CDI CR as the real-node lane changes it
// (realupstream.RealNodeCDI: the local registry listed as insecure, the real Node's taint tolerated), the harness's storage classes and profiles as the kind lane installs them, and the
// local-path provisioner with the real Node's folder; then it creates the worker's DataVolume as
// the chart renders it (cdi.kubevirt.io/storage.usePopulator "false", a storage request and class,
// Cozystack v1.6.1 packages/apps/kubernetes/templates/cluster.yaml:91-125) with a registry source
// on the local registry, as the Kairos pools import theirs. Its class binds on first consumer: the
// VMI that boots from it is that consumer (KubeVirt's temporary launcher Pod, then CDI's importer).
func startDiskImport(ctx context.Context, t *testing.T, b *realupstream.Build, c *cluster.Cluster, cs kubernetes.Interface, api *controlplane.APIServer, n *node.Node, reg *node.Registry, imgs node.Images) *diskImport {
	t.Helper()
	dir := t.TempDir()
	ctl, err := realupstream.StartCDIController(ctx, b, c, realupstream.Options{Dir: filepath.Join(dir, "cdi-controller"), Kubeconfig: api.AdminKubeconfig,
		PodCIDR: world.PodCIDR, PodMetricsDir: filepath.Join(dir, "pod-metrics"), RealPodCIDRs: []string{n.Subnet}})
	if err != nil {
		t.Fatal(err)
	}
	stopped(t, ctl)
	if err := os.MkdirAll(filepath.Join(dir, "pod-metrics"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := realupstream.RealNodeCDI(ctx, c, reg.Host, node.Taint); err != nil {
		t.Fatal(err)
	}
	sc, err := cluster.New("management", api.Admin()) // to see CDI's kinds
	if err != nil {
		t.Fatal(err)
	}
	a, err := install.NewApplier(sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, install.StorageClasses()); err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, install.StorageProfiles()); err != nil {
		t.Fatal(err)
	}
	if err := install.StorageProfilesAccept(ctx, a.Dynamic(), install.GateOptions{Log: testkit.LogWriter(t)}); err != nil {
		t.Fatal(err)
	}
	volumes := filepath.Join(n.Dir(), "local-path")
	mgr, err := ctrl.NewManager(api.Admin(), ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cdi.SetupProvisioner(mgr, map[string]string{n.Name: volumes}); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { stop(); <-done })

	const name = "worker-disk"
	endpoint := node.WorkerDiskURL(reg.Host, false)
	dv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
		"metadata": map[string]any{"name": name, "namespace": "default", "annotations": map[string]any{"cdi.kubevirt.io/storage.usePopulator": "false"}},
		"spec": map[string]any{
			"source":  map[string]any{"registry": map[string]any{"url": endpoint}},
			"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "512Mi"}}, "storageClassName": install.PoolStorageClasses[0]},
		},
	}}
	if err := sc.Client.Create(ctx, dv); err != nil {
		t.Fatalf("the worker's DataVolume: %v", err)
	}
	w := watchImport(ctx, sc, cs, name)
	return &diskImport{DataVolume: name, check: func() {
		t.Helper()
		w.stop()
		checkImport(ctx, t, sc, n, imgs, name, volumes, w)
	}, checkDeleted: func() {
		t.Helper()
		if err := sc.Client.Delete(ctx, dv); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		testkit.Eventually(ctx, t, "the DataVolume's volume deleted and its folder removed from the real Node", testkit.Left(ctx), testkit.Err(func() error {
			entries, err := os.ReadDir(volumes)
			if err != nil {
				return err
			}
			var pvs corev1.PersistentVolumeList
			if err := sc.Client.List(ctx, &pvs); err != nil {
				return err
			}
			if len(entries) > 0 || len(pvs.Items) > 0 {
				return fmt.Errorf("%d volumes, %d folders in %s", len(pvs.Items), len(entries), volumes)
			}
			return nil
		}))
		t.Logf("the volume and its folder gone %s after the DataVolume's deletion", time.Since(start).Round(100*time.Millisecond))
	}}
}

// importWatch records, while the import runs, the DataVolume's phases and progress and the
// importer Pods seen.
type importWatch struct {
	mu        sync.Mutex
	phases    []string
	progress  []string
	importers map[string]corev1.Pod
	succeeded time.Duration
	done      chan struct{}
	cancel    context.CancelFunc
}

func watchImport(ctx context.Context, c *cluster.Cluster, cs kubernetes.Interface, name string) *importWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &importWatch{importers: map[string]corev1.Pod{}, done: make(chan struct{}), cancel: cancel}
	start := time.Now()
	add := func(list *[]string, v string) {
		if v != "" && (len(*list) == 0 || (*list)[len(*list)-1] != v) {
			*list = append(*list, v)
		}
	}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			dv := &unstructured.Unstructured{}
			dv.SetGroupVersionKind(cdiDV)
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, dv); err == nil {
				phase, _, _ := unstructured.NestedString(dv.Object, "status", "phase")
				progress, _, _ := unstructured.NestedString(dv.Object, "status", "progress")
				w.mu.Lock()
				add(&w.phases, phase)
				add(&w.progress, progress)
				if phase == "Succeeded" && w.succeeded == 0 {
					w.succeeded = time.Since(start)
				}
				w.mu.Unlock()
			}
			if pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=containerized-data-importer"}); err == nil {
				w.mu.Lock()
				for _, p := range pods.Items {
					w.importers[p.Name] = p // the latest view: the Pod goes once the import succeeded
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *importWatch) stop() { w.cancel(); <-w.done }

var cdiDV = realupstream.CDIConfigGVR.GroupVersion().WithKind("DataVolume")

// checkImport: the DataVolume Succeeded at 100.0% (CDI v1.64.0
// pkg/controller/datavolume/import-controller.go:296-313) through the phases of a first-consumer
// import; CDI's importer Pod ran on the real Node with an address of its pod range; the claim's
// annotations carry the importer's own termination message, "Import Complete"
// (cmd/cdi-importer/importer.go:39, copied by pkg/controller/import-controller.go:374-476); and
// the volume is a folder of the real Node on this host holding disk.img, whose first bytes are
// the worker's disk as built (the importer's qemu-img convert copies it and may grow it to the
// claim's usable size, pkg/importer/data-processor.go:294-357).
func checkImport(ctx context.Context, t *testing.T, c *cluster.Cluster, n *node.Node, imgs node.Images, name, volumes string, w *importWatch) {
	t.Helper()
	dv := &unstructured.Unstructured{}
	dv.SetGroupVersionKind(cdiDV)
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, dv); err != nil {
		t.Fatal(err)
	}
	phase, _, _ := unstructured.NestedString(dv.Object, "status", "phase")
	progress, _, _ := unstructured.NestedString(dv.Object, "status", "progress")
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("the DataVolume: phases %v, progress %v; Succeeded %s after its creation", w.phases, w.progress, w.succeeded.Round(100*time.Millisecond))
	if phase != "Succeeded" || progress != "100.0%" {
		t.Errorf("DataVolume %s: phase %q progress %q, want Succeeded at 100.0%%", name, phase, progress)
	}
	if len(w.phases) == 0 || w.phases[0] != "WaitForFirstConsumer" && w.phases[0] != "Pending" {
		t.Errorf("DataVolume %s went %v, want it waiting for its first consumer first (its class binds then)", name, w.phases)
	}
	subnet := netip.MustParsePrefix(n.Subnet)
	var names []string
	for k := range w.importers {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Errorf("no importer Pod was seen")
	}
	for _, k := range names {
		p := w.importers[k]
		ip, _ := netip.ParseAddr(p.Status.PodIP)
		t.Logf("importer Pod %s on %q at %s, containers %+v", k, p.Spec.NodeName, p.Status.PodIP, p.Status.ContainerStatuses)
		if p.Spec.NodeName != n.Name || !subnet.Contains(ip) {
			t.Errorf("importer Pod %s ran on %q at %q, want the real Node %s in %s", k, p.Spec.NodeName, p.Status.PodIP, n.Name, n.Subnet)
		}
	}
	var pvc corev1.PersistentVolumeClaim
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &pvc); err != nil {
		t.Fatal(err)
	}
	if got := pvc.Annotations["cdi.kubevirt.io/storage.condition.running.message"]; got != "Import Complete" {
		t.Errorf("claim %s: the importer's message %q, want Import Complete", name, got)
	}
	var pv corev1.PersistentVolume
	if err := c.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, volumes+"/") {
		t.Fatalf("volume %s: %+v, want a folder under the real Node's %s", pv.Name, pv.Spec.PersistentVolumeSource, volumes)
	}
	got, err := os.Open(filepath.Join(pv.Spec.HostPath.Path, "disk.img"))
	if err != nil {
		t.Fatalf("the imported disk on the host: %v", err)
	}
	defer got.Close()
	st, _ := got.Stat()
	// the worker-disk image's /disk/disk.img as built (the path CDI's registry import reads,
	// containerized-data-importer v1.64.0 pkg/importer/transport.go:157-178)
	want, err := os.ReadFile(filepath.Join(imgs.Dir, "disk", "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, len(want))
	if _, err := io.ReadFull(got, head); err != nil || !bytes.Equal(head, want) {
		t.Errorf("%s (%d bytes) does not begin with the worker's disk as built (%d bytes, sha256 %x): %v", got.Name(), st.Size(), len(want), sha256.Sum256(want), err)
	}
	t.Logf("the imported disk: %s, %d bytes, beginning with the %d bytes of the disk as built", got.Name(), st.Size(), len(want))
}
