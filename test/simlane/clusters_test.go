package simlane

import (
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// checkClusters holds the verdict's conformance clusters to the lane's: each named with the
// release the lane gives it, and each judged on its own pools alone: red when a fault targets
// one of its pools, clean otherwise, whatever the other clusters' pools did. The sim lane's
// clusters run at two tenant versions, so a run whose faults hit one of them is the case of a
// fault in one version's cluster leaving the other version's verdict clean.
func checkClusters(t *testing.T, l *lane.Lane, targets map[string][]judgedFault, v verdict.Verdict) {
	t.Helper()
	want := l.ConformanceClusters()
	if len(v.Clusters) != len(want) {
		t.Errorf("verdict.json names %d conformance clusters, the lane has %d", len(v.Clusters), len(want))
		return
	}
	versions := map[string]bool{}
	for i, c := range v.Clusters {
		// A run may rename a cluster (the green run's longest names); its pools say which it is.
		w := want[i]
		for _, p := range l.Pools {
			if len(c.Pools) > 0 && p.Name == c.Pools[0] {
				w, _ = l.Cluster(p.ClusterName())
			}
		}
		versions[c.Version] = true
		if c.Version != w.Kubernetes.Version || c.Patch != w.Kubernetes.Patch {
			t.Errorf("verdict.json cluster %d: %s at %s (%s), want %s's %s (%s)", i, c.Name, c.Version, c.Patch, w.Name, w.Kubernetes.Version, w.Kubernetes.Patch)
		}
		hit := ""
		for _, p := range c.Pools {
			if len(targets[p]) > 0 {
				hit = p
			}
		}
		switch {
		case hit != "" && c.Result != verdict.Fail:
			t.Errorf("cluster %s at Kubernetes %s: %s, want fail: a fault targets its pool %s", c.Name, c.Version, c.Result, hit)
		case hit == "" && (c.Result != verdict.Pass || c.Failures != 0):
			t.Errorf("cluster %s at Kubernetes %s: %s with %d failures, want pass: no fault targets its pools %v", c.Name, c.Version, c.Result, c.Failures, c.Pools)
		case hit == "" && v.Result == verdict.Fail:
			t.Logf("cluster %s at Kubernetes %s passed beside the failed run", c.Name, c.Version)
		}
	}
	if l.Name == "sim" && len(versions) < 2 {
		t.Errorf("the sim lane's clusters run at %d tenant version(s), want two", len(versions))
	}
}
