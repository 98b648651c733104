package registry

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

func load(t *testing.T, name string) *lane.Lane {
	t.Helper()
	l, err := lane.Load(filepath.Join("..", "..", "lanes", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The pods a kind lane runs on its one node are counted from the install catalogue, the tenant
// chart's management-side workloads and the suites' peak workers, against the kubelet's maxPods
// the node config sets; what the catalogue cannot count is said, not guessed.
func TestNodePodsAreCountedAgainstMaxPods(t *testing.T) {
	for name, want := range map[string]int{
		// 21 gated Deployments + 3 etcd + 3 clusters (one per tenant version, refusals) x 5 +
		// 2 x 6 workers (3 in each version's cluster)
		"kubernetes": 21 + 3 + 3*5 + 2*6,
		// 4 clusters (join-v1-35, join-v1-34, lifecycle, refusals) x 5 + 2 x 13 workers at the
		// lifecycle peak (the join clusters' 6 beside the lifecycle cluster's 7)
		"kubernetes-lifecycle": 21 + 3 + 4*5 + 2*13,
	} {
		n, err := CountNodePods(load(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if n.Counted != want || n.MaxPods != 512 || !strings.Contains(n.Uncounted, "the pods of the platform's 46 Packages") {
			t.Errorf("%s: %d counted of %d (want %d): %v; %s", name, n.Counted, n.MaxPods, want, n.Terms, n.Uncounted)
		}
	}
	for _, sec := range PlanSections(load(t, "sim")) {
		for _, line := range sec.Lines {
			if strings.Contains(line, "maxPods") {
				t.Fatalf("a sim lane's plan counts node pods against maxPods: %q", line)
			}
		}
	}
}

// A kind lane whose counted pods exceed maxPods is refused by lanes-check, naming the count.
func TestTooManyPodsForTheNodeIsRefused(t *testing.T) {
	l := load(t, "kubernetes")
	l.Runner.MemoryGiB = 4096
	for i := 0; len(l.Pools) < 120; i++ {
		l.Pools = append(l.Pools, lane.Pool{Name: fmt.Sprintf("p%d", i), Class: "talos", Replicas: 4, Cluster: fmt.Sprintf("c%d", i)})
	}
	err := Check(l)
	if err == nil || !strings.Contains(err.Error(), "over the kubelet's maxPods 512") {
		t.Fatalf("want the pods refused, got %v", err)
	}
}
