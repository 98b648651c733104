package simulated_test

import (
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
)

// A sim run lists the real components it runs, each with its module, version and sum as the
// binary (or, for Cluster API, this program) records them.
func TestComponents(t *testing.T) {
	cptest.Tools(t)
	s, err := simulated.New(testLane(), substrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	comps, err := s.Components()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"etcd": "go.etcd.io/etcd/server/v3@v3.6.5", "kube-apiserver": "k8s.io/kubernetes@v1.35.4",
		"kube-controller-manager": "k8s.io/kubernetes@v1.35.4", "kube-scheduler": "k8s.io/kubernetes@v1.35.4",
		"kwok": "sigs.k8s.io/kwok@v0.8.0", "capk": "sigs.k8s.io/cluster-api-provider-kubevirt@v0.1.10",
		"cabpt": "github.com/siderolabs/cluster-api-bootstrap-provider-talos@v0.6.12", "cluster-api": "sigs.k8s.io/cluster-api@v1.13.6",
		"kubectl": "k8s.io/kubernetes@v1.35.4", "helm-controller": "github.com/fluxcd/helm-controller@v1.6.2",
		"cozystack": "github.com/cozystack/cozystack@v1.6.1", "source-controller": "github.com/fluxcd/source-controller@v1.9.0",
		"cilium": "github.com/cilium/cilium@v1.19.5", "kubevirt": "kubevirt.io/kubevirt@v1.8.4",
		"cdi-controller":  "kubevirt.io/containerized-data-importer@v1.64.0",
		"virt-controller": "kubevirt.io/kubevirt@v1.8.4",
	}
	for _, c := range comps {
		if got := c.Module + "@" + c.Version; got != want[c.Name] {
			t.Errorf("%s: %s, want %s", c.Name, got, want[c.Name])
		}
		if !strings.HasPrefix(c.Sum, "h1:") || c.Use == "" {
			t.Errorf("%s: sum %q use %q", c.Name, c.Sum, c.Use)
		}
		delete(want, c.Name)
	}
	for n := range want {
		t.Errorf("%s is not listed", n)
	}
}
