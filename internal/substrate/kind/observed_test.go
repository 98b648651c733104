package kind

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
)

// observedKind is one file of fixtures/observed/kind: a kind cluster's Nodes and Pods as
// kubeadm, the kubelet and the platform's charts write them, and what the announcement check
// must make of them.
type observedKind struct {
	Source string `json:"source"`
	// Meaning is unannounced (no node may announce a layer-2 address: the check says why, in
	// the words of Says) or announced (some node may: the check says nothing).
	Meaning string           `json:"meaning"`
	Why     string           `json:"why"`
	Says    []string         `json:"says"`
	Objects []map[string]any `json:"objects"`
}

// Each observed kind state, written to a real API server, is judged as MetalLB's layer-2
// speaker judges it: an unannounced one is named node by node with what keeps each from
// announcing (kubeadm's exclude label on the control plane, beside a Ready speaker), an
// announced one is not.
func TestObservedKindStatesAreJudgedAsMetalLBDoes(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "fixtures", "observed", "kind")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no observed kind states in %s (%v)", dir, err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		var o observedKind
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, &o); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(string(readme), "`kind/"+name+"`") {
			t.Errorf("%s: fixtures/observed/README.md does not list it as `kind/%s`", name, name)
		}
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			if strings.TrimSpace(o.Source) == "" || strings.TrimSpace(o.Why) == "" || len(o.Objects) == 0 {
				t.Fatalf("%s: a source, a why and objects are required", name)
			}
			kube := placeKind(t, o.Objects)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			why, err := noAnnouncer(ctx, kube)
			if err != nil {
				t.Fatal(err)
			}
			// The harness's Service for the tenant apiserver, its address assigned as MetalLB's
			// controller assigns one from the pool.
			check(t)(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-root"}}, metav1.CreateOptions{}))
			svc, err := kube.CoreV1().Services("tenant-root").Create(ctx, tenantLB("tenant-root", "kubernetes-t1"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.255.200"}}
			check(t)(kube.CoreV1().Services("tenant-root").UpdateStatus(ctx, svc, metav1.UpdateOptions{}))
			verdict := Unannounced(kube)(ctx, "tenant-root", "kubernetes-t1-admin-kubeconfig")
			switch o.Meaning {
			case "unannounced":
				if len(o.Says) == 0 {
					t.Fatalf("%s: an unannounced state says what the check must name (says)", name)
				}
				for _, want := range o.Says {
					if !strings.Contains(why, want) {
						t.Errorf("%s: %s; the check said %q, without %q", name, o.Why, why, want)
					}
				}
				if head := "MetalLB assigned 172.18.255.200 to Service tenant-root/kubernetes-t1-e2e-lb, but no node announces it: "; verdict != head+why {
					t.Errorf("the tenant phase's verdict: got %q, want %q", verdict, head+why)
				}
			case "announced":
				if why != "" || verdict != "" {
					t.Errorf("%s: %s; the check said %q (verdict %q)", name, o.Why, why, verdict)
				}
			default:
				t.Errorf("meaning %q is neither unannounced nor announced", o.Meaning)
			}
		})
	}
}

// placeKind writes the objects to a fresh API server, with their status as the file gives it,
// and the namespaces and ServiceAccounts admission wants first.
func placeKind(t *testing.T, objects []map[string]any) kubernetes.Interface {
	t.Helper()
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "kind"})
	c, err := cluster.New("kind", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	kube := c.Kube
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ensure := func(_ any, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, m := range objects {
		kind, _ := m["kind"].(string)
		switch kind {
		case "Node":
			var n corev1.Node
			into(t, m, &n)
			status := n.Status
			got, err := kube.CoreV1().Nodes().Create(ctx, &n, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got.Status = status
			check(t)(kube.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}))
		case "Pod":
			var p corev1.Pod
			into(t, m, &p)
			ensure(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}, metav1.CreateOptions{}))
			// No controller manager here makes ServiceAccounts; the chart's own is named in the pod.
			for _, sa := range []string{"default", p.Spec.ServiceAccountName} {
				if sa != "" {
					ensure(kube.CoreV1().ServiceAccounts(p.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}))
				}
			}
			status := p.Status
			got, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, &p, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got.Status = status
			check(t)(kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{}))
		default:
			t.Fatalf("no place for a %s in a kind cluster's observed state", kind)
		}
	}
	return kube
}

// into converts an observed object to its Go type, refusing fields the type does not have.
func into(t *testing.T, m map[string]any, obj any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, obj, true); err != nil {
		t.Fatalf("%v %v: %v", m["kind"], m["metadata"], err)
	}
}

func check(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}
