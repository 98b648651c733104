package world_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/fixtures"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
)

const digest = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

func ngc(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cozystack.io/v1alpha1", "kind": "NodeGroupClass", "spec": spec}}
	u.SetName(name)
	return u
}

// Every NodeGroupClass rule is enforced by the apiserver itself (CEL in the CRD): each case is
// sent to a real kube-apiserver and must be refused with its message, or accepted.
func TestNodeGroupClassRulesAreEnforcedByTheAPIServer(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "ngc"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cluster.New("ngc", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	installFixtureCRD(ctx, t, c, "nodegroupclasses.cozystack.io")
	c, _ = cluster.New("ngc", api.Admin()) // a client whose discovery sees the CRD

	img := "registry.example.invalid/acme/kairos-worker@" + digest
	cases := []struct {
		name, class string
		spec        map[string]any
		refusal     string // "" means accepted
	}{
		{"built-in talos as shipped", "talos", map[string]any{"os": "talos"}, ""},
		{"built-in kairos as shipped", "kairos", map[string]any{"os": "kairos"}, ""},
		{"operator kairos class with image and release", "acme", map[string]any{"os": "kairos", "image": img, "kubernetesVersion": "v1.35.4"}, ""},
		{"operator talos class without image", "acme-talos", map[string]any{"os": "talos"}, ""},
		{"talos under another os", "talos", map[string]any{"os": "kairos"}, "the built-in class talos is spec {os talos} and nothing else"},
		{"kairos with an image", "kairos", map[string]any{"os": "kairos", "image": img, "kubernetesVersion": "v1.35.4"}, "the built-in class kairos is spec {os kairos} and nothing else"},
		{"image on a talos class", "acme-t2", map[string]any{"os": "talos", "image": img, "kubernetesVersion": "v1.35.4"}, "spec.image is allowed only on a Kairos class"},
		{"image without release", "acme-k2", map[string]any{"os": "kairos", "image": img}, "spec.kubernetesVersion is required with spec.image"},
		{"release without image", "acme-k3", map[string]any{"os": "kairos", "kubernetesVersion": "v1.35.4"}, "spec.kubernetesVersion is allowed only with spec.image"},
		{"image not by digest", "acme-k4", map[string]any{"os": "kairos", "image": "registry.example.invalid/k:latest", "kubernetesVersion": "v1.35.4"}, "spec.image in body should match"},
		{"unknown os", "acme-k5", map[string]any{"os": "flatcar"}, "Unsupported value: \"flatcar\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Client.Create(ctx, ngc(tc.class, tc.spec))
			switch {
			case tc.refusal == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
				t.Fatalf("want a refusal containing %q, got %v", tc.refusal, err)
			}
		})
	}

	t.Run("the whole spec is immutable", func(t *testing.T) {
		for _, name := range []string{"talos", "acme"} {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(ngc("", nil).GroupVersionKind())
			if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
				t.Fatal(err)
			}
			_ = unstructured.SetNestedField(obj.Object, "v1.35.5", "spec", "kubernetesVersion")
			if name == "talos" {
				_ = unstructured.SetNestedField(obj.Object, "kairos", "spec", "os")
			}
			err := c.Client.Update(ctx, obj)
			if err == nil || !strings.Contains(err.Error(), "spec is immutable") {
				t.Fatalf("update of %s: want \"spec is immutable\", got %v", name, err)
			}
		}
	})
}

func installFixtureCRD(ctx context.Context, t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	crds, err := fixtures.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range crds {
		if f.CRD.Name != name {
			continue
		}
		if err := realupstream.InstallCRDs(ctx, c, []realupstream.CRD{{Source: "fixtures/" + f.File, CRD: f.CRD}}, nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no fixture CRD %s", name)
}
