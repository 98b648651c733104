package kind

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// fakeKind creates a "cluster" by writing the kubeconfig of a local apiserver and, a moment
// later, registering the Nodes as kubeadm leaves them: the control plane labelled
// node-role.kubernetes.io/control-plane="" and node.kubernetes.io/exclude-from-external-load-balancers=""
// (markcontrolplane.go:31-34,54-56 at v1.35.4), no
// Node Ready (no CNI).
type fakeKind struct {
	api   *controlplane.APIServer
	kube  kubernetes.Interface
	mu    sync.Mutex
	specs []createSpec
	names []string
}

// newFakeKind is a kind provider whose cluster is a real local apiserver.
func newFakeKind(t *testing.T) *fakeKind {
	t.Helper()
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "kind"})
	kube, err := kubernetes.NewForConfig(api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	return &fakeKind{api: api, kube: kube}
}

func (f *fakeKind) Create(name string, spec createSpec) error {
	f.mu.Lock()
	f.specs = append(f.specs, spec)
	f.names = append(f.names, name)
	f.mu.Unlock()
	if err := cluster.WriteKubeconfig(spec.Kubeconfig, "kind-"+name, f.api.Admin()); err != nil {
		return err
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		for i, n := range spec.Config.Nodes {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + string(n.Role), Labels: map[string]string{"kubernetes.io/os": "linux"}}}
			if i > 0 {
				node.Name += string(rune('0' + i))
			}
			if n.Role == "control-plane" {
				node.Labels[assumptions.ControlPlaneLabel] = ""
				node.Labels[assumptions.ExcludeFromExternalLBLabel] = ""
			}
			_, _ = f.kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{})
		}
	}()
	return nil
}

func (f *fakeKind) List() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.names...), nil
}

func (f *fakeKind) ExportKubeConfig(name, path string) error {
	return cluster.WriteKubeconfig(path, "kind-"+name, f.api.Admin())
}

func (f *fakeKind) Delete(string, string) error { return nil }

// The cluster phase against a local apiserver: kind is asked not to wait for Ready (no node
// is Ready before the platform's CNI), the phase waits for the Node objects instead, and the
// control-plane node ends up labelled node-role.kubernetes.io/control-plane=true, the value
// kube-ovn's ovn-central selects on the generic variant; a worker is not labelled. A second
// run finds the cluster and refuses it unless E2E_REUSE=1, which reuses it and labels again.
func TestClusterPhaseCreatesWithoutWaitingAndLabelsTheControlPlane(t *testing.T) {
	fake := newFakeKind(t)
	l := pinned(t, "kubernetes")
	l.Kind.Workers = 1
	var log bytes.Buffer
	work := t.TempDir()
	s, err := New(l, Options{Options: substrate.Options{WorkDir: work, Log: &log}, provider: fake})
	if err != nil {
		t.Fatal(err)
	}
	s.ensureProvider()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c, err := s.bringUp(ctx)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the cluster phase took %s", took)
	}
	if len(fake.specs) != 1 || fake.specs[0].WaitForReady != 0 {
		t.Fatalf("kind was asked to wait for Ready: %+v", fake.specs)
	}
	if filepath.Dir(fake.specs[0].Kubeconfig) != work {
		t.Fatalf("kubeconfig at %s", fake.specs[0].Kubeconfig)
	}
	nodes, err := fake.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 2 {
		t.Fatalf("nodes: %v %d", err, len(nodes.Items))
	}
	for _, n := range nodes.Items {
		v, ok := n.Labels[assumptions.ControlPlaneLabel]
		switch {
		case strings.HasSuffix(n.Name, "control-plane") && v != "true":
			t.Errorf("%s: %s=%q, want \"true\"", n.Name, assumptions.ControlPlaneLabel, v)
		case strings.Contains(n.Name, "worker") && ok:
			t.Errorf("worker %s labelled %s=%q", n.Name, assumptions.ControlPlaneLabel, v)
		}
		// MetalLB's speaker announces nothing from a node with kubeadm's exclude label.
		if _, ok := n.Labels[assumptions.ExcludeFromExternalLBLabel]; ok {
			t.Errorf("%s still carries %s: MetalLB would announce no LoadBalancer address from it", n.Name, assumptions.ExcludeFromExternalLBLabel)
		}
	}
	if c == nil || !strings.Contains(log.String(), "kind: labelled kubernetes-control-plane node-role.kubernetes.io/control-plane=true") {
		t.Fatalf("log:\n%s", log.String())
	}

	// The cluster exists now: a run that does not reuse it is refused, one that does labels again.
	if _, err := s.bringUp(ctx); err == nil || !strings.Contains(err.Error(), "a kind cluster named kubernetes exists already: E2E_REUSE=1 reuses it") {
		t.Fatalf("an existing cluster: %v", err)
	}
	cp := nodes.Items[0]
	if !strings.HasSuffix(cp.Name, "control-plane") {
		cp = nodes.Items[1]
	}
	cp.Labels[assumptions.ControlPlaneLabel] = ""
	cp.Labels[assumptions.ExcludeFromExternalLBLabel] = ""
	if _, err := fake.kube.CoreV1().Nodes().Update(ctx, &cp, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.opts.Reuse = true
	if _, err := s.bringUp(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := fake.kube.CoreV1().Nodes().Get(ctx, cp.Name, metav1.GetOptions{})
	if _, excluded := got.Labels[assumptions.ExcludeFromExternalLBLabel]; excluded {
		t.Fatalf("reuse: %s still on %s", assumptions.ExcludeFromExternalLBLabel, got.Name)
	}
	if got.Labels[assumptions.ControlPlaneLabel] != "true" || len(fake.specs) != 1 {
		t.Fatalf("reuse: label %q, creates %d", got.Labels[assumptions.ControlPlaneLabel], len(fake.specs))
	}
}

// Nodes that never register end the wait at the phase deadline, saying how many did.
func TestLabelControlPlaneSaysWhatIsMissing(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "kind"})
	c, err := cluster.New("kind", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x-worker"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicFor(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = LabelControlPlane(ctx, dyn, 1, nil)
	if err == nil || !strings.Contains(err.Error(), "no Node carries node-role.kubernetes.io/control-plane yet") {
		t.Fatalf("want the missing label named, got %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	_, err = LabelControlPlane(ctx2, dyn, 3, nil)
	var stuck *install.StuckError
	if !errors.As(err, &stuck) || !strings.Contains(err.Error(), "1 of 3 registered (x-worker)") {
		t.Fatalf("want the count named, got %v", err)
	}
}

func dynamicFor(t *testing.T, c *cluster.Cluster) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.REST)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}
