package testbed

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// The sim lane with the longest run id and the longest cluster name its pools allow: each pool
// is a node group of its own cluster, the clusters are the apps the tenant creates, in lane
// order, and every Machine and VM name a pool gets fits a label value; the cluster name one
// character longer is refused by the lane, naming the field.
func TestEveryPoolIsNamedInItsOwnClusterAtTheLongestNames(t *testing.T) {
	l, err := lane.Load(filepath.Join("..", "..", "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := tenant.NewRun(strings.Repeat("9", lane.MaxRunID))
	if err != nil {
		t.Fatal(err)
	}
	longest := 0
	for _, p := range l.Pools {
		if p.Cluster != "" {
			longest = max(longest, len(p.Name))
		}
	}
	if longest == 0 {
		t.Fatal("lanes/sim.yaml puts no pool in a second cluster")
	}
	rename := func(n int) *lane.Lane {
		c := *l
		c.Pools = append([]lane.Pool(nil), l.Pools...)
		name := "classes-" + strings.Repeat("x", n-len("classes-"))
		for i := range c.Pools {
			if c.Pools[i].Cluster != "" {
				c.Pools[i].Cluster = name
			}
		}
		return &c
	}
	n := 63 - len("kubernetes-") - 1 - lane.MaxRunID - 1 - 12 - longest
	long := rename(n)
	if errs := long.Validate(); len(errs) > 0 {
		t.Fatalf("a %d-character cluster name is refused: %v", n, errs)
	}
	tn := New(Options{Lane: long, Run: run})
	if len(tn.Apps) != 2 || tn.Apps[0].Role != lane.DefaultCluster || tn.Apps[1].Role != long.Pools[1].Cluster {
		t.Fatalf("apps %+v, want the default cluster, then %s", tn.Apps, long.Pools[1].Cluster)
	}
	for _, p := range tn.Pools {
		want := run.Cluster(long.Pools[laneIndex(long, p.Name())].ClusterName())
		if p.App.Names != want || p.Names.Names != want {
			t.Errorf("pool %s: app %s, names in %s; want both %s", p.Name(), p.App.Names, p.Names.Names, want)
		}
		if err := p.App.Names.CheckPoolNames(p.Name()); err != nil {
			t.Errorf("pool %s: %v", p.Name(), err)
		}
		if vm := len(p.Names.MachineDeployment()) + len("-abcde-fghij"); vm > 63 {
			t.Errorf("pool %s: its VM names reach %d characters", p.Name(), vm)
		}
		if got := tn.PoolsOf(p.App); !containsPool(got, p.Name()) {
			t.Errorf("pool %s is not among the pools of its app %s", p.Name(), p.App.Names)
		}
	}
	errs := rename(n + 1).Validate()
	if len(errs) == 0 || !strings.Contains(errs.Error(), ".cluster: pool ") || !strings.Contains(errs.Error(), "shorten the pool or cluster name by 1") {
		t.Errorf("a %d-character cluster name: %v; want it refused on pools[].cluster", n+1, errs)
	}
}

func laneIndex(l *lane.Lane, pool string) int {
	for i, p := range l.Pools {
		if p.Name == pool {
			return i
		}
	}
	return -1
}

func containsPool(ps []join.Pool, name string) bool {
	for _, p := range ps {
		if p.Name() == name {
			return true
		}
	}
	return false
}
