package join

import (
	"testing"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// The Kubernetes cluster a pool's workers join is its app's, once the app's control plane
// answered; the reports name the app and its release.
func TestAPoolsClusterIsItsApps(t *testing.T) {
	c := &cluster.Cluster{Name: "pools"}
	p := Pool{Spec: lane.Pool{Name: "md0"}, App: &tenant.App{Role: "pools", Cluster: c, Release: lane.Release{Patch: "v1.35.4"}}}
	if p.Kubernetes() != c || p.Name() != "md0" || p.Cluster() != "cluster pools at Kubernetes v1.35.4" {
		t.Errorf("Kubernetes() %v, Name() %q, Cluster() %q", p.Kubernetes(), p.Name(), p.Cluster())
	}
	if (Pool{}).Kubernetes() != nil || (Pool{}).Cluster() != "" {
		t.Errorf("a pool whose app is not up yet: want no cluster")
	}
}
