package catalog

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// Every shipped kind lane pins every component the catalog gates, and nothing else.
func TestShippedKindLanesPinTheWholeCatalog(t *testing.T) {
	lanes, err := lane.LoadDir(filepath.Join("..", "..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	kind := 0
	for _, l := range lanes {
		if l.Substrate != lane.SubstrateKind {
			continue
		}
		kind++
		pinned, err := ForLane(l)
		if err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		if len(pinned) != len(Components()) {
			t.Fatalf("%s: %d pinned of %d", l.Name, len(pinned), len(Components()))
		}
		for name, want := range map[string]string{"capi-core": "v1.13.7", "capi-kubeadm-bootstrap": "v1.13.7", "capi-talos-bootstrap": "v0.6.13", "capi-kairos-bootstrap": "v0.2.1", "capk": "v0.1.10"} {
			for _, p := range pinned {
				if p.Name == name && p.Pin.Version != want {
					t.Errorf("%s: %s pinned at %s, want %s", l.Name, name, p.Pin.Version, want)
				}
			}
		}
	}
	if kind == 0 {
		t.Fatal("no kind lane shipped")
	}
}

func TestForLaneNamesWhatIsMissingOrUnknown(t *testing.T) {
	l := &lane.Lane{File: "lanes/x.yaml"}
	for _, c := range Components() {
		l.Components = append(l.Components, lane.Component{Name: c.Name, Version: "v1"})
	}
	l.Components = append(l.Components, lane.Component{Name: lane.KindNodeComponent, Version: "v1.35"})
	if _, err := ForLane(l); err != nil {
		t.Fatal(err)
	}
	l.Components = append(l.Components[1:], lane.Component{Name: "linstor", Version: "v1"})
	_, err := ForLane(l)
	if err == nil || !strings.Contains(err.Error(), "lanes/x.yaml: components: no pin for [cozystack-operator]") {
		t.Fatalf("missing pin: %v", err)
	}
	l.Components = append(l.Components, lane.Component{Name: "cozystack-operator", Version: "v1"})
	_, err = ForLane(l)
	if err == nil || !strings.Contains(err.Error(), "[linstor] are not installed by the kind lane") {
		t.Fatalf("unknown component: %v", err)
	}
}

// Every provider in the namespace the Cluster API providers share reports its version through
// the operator and has its webhooks checked, except the Kamaji control plane provider, which
// ships none (a check there would demand a Service that never exists).
func TestProvidersShareOneNamespaceAndAreCheckedForIt(t *testing.T) {
	for _, c := range Components() {
		if c.Namespace != "cozy-cluster-api" || c.Name == "capi-operator" {
			continue
		}
		wantWebhooks := c.Name != "capi-kamaji"
		if c.SharedWebhooks != wantWebhooks || c.Version.Kind == "" || len(c.Deployments) != 1 {
			t.Errorf("%s: shared webhooks %t, version %s, deployments %v", c.Name, c.SharedWebhooks, c.Version.Describe(), c.Deployments)
		}
		if !c.SharedWebhooks && c.NoWebhooks == "" {
			t.Errorf("%s: no webhook check and no reason", c.Name)
		}
	}
}

// Flux is the one Deployment the operator installs, not one per controller.
func TestFluxIsOneDeployment(t *testing.T) {
	f, _ := Find("flux")
	if f.Namespace != "cozy-fluxcd" || len(f.Deployments) != 1 || f.Deployments[0] != "flux" {
		t.Fatalf("flux gate: %s %v", f.Namespace, f.Deployments)
	}
}
