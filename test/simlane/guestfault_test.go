package simlane

import (
	"path/filepath"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

// guestFaultsScenario holds the guest faults a correct harness fails, one to a pool of a copy of
// the real Node's lane with three Talos pools (md0 of the lane, md1 and md2 like it): a CA that
// did not sign the tenant's apiserver, an apiserver the guest cannot reach, a bootstrap token
// that expired. In each the real kubelet inside the VM never gets a certificate: no CSR, no
// Node, and the pool fails at join at the pools phase's deadline (runLane's checks: expect).
// The first two leave a Talos console silent (the kubelet with rotateCertificates exits only
// when the apiserver answers it); the third's apiserver answers 401, so the kubelet exits five
// minutes after its start and machined's console line carries its last words, which the
// failure must quote.
const guestFaultsScenario = "guest-ca-wrong@md0,guest-endpoint-unreachable@md1,guest-token-expired@md2"

// guestFaultCeiling is the copy's pools ceiling: the token's pool must reach its kubelet's
// five-minute exit before it, three VMs booting under TCG on 2 cores side by side (on a quiet
// machine their kubelets started 1m55s to 1m57s into the phase and the exit came at 7m03s; a
// loaded one starts them later).
const guestFaultCeiling = 9 * time.Minute

// guestFaultPools are the pools the copy adds to lanes/sim-node.yaml's md0.
var guestFaultPools = []string{"md1", "md2"}

// The real Node's lane under the guest faults, each on a pool of its own, all three VMs on the
// real Node at once: several pools failing together, each for its own reason.
func TestTheRealNodeLaneJudgesGuestFaults(t *testing.T) {
	realNodePreflight(t)
	root := projectRoot(t)
	path := guestFaultsLane(t, root)
	l, err := lane.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildOrchestrator(t, root)
	tmp := shortTmp(t)
	o := runLane(t, root, bin, l, path, guestFaultsScenario, "TMPDIR="+tmp)
	t.Logf("%s: %s, %d failure(s), verdict %s after the deadline, wall %s", o.name, o.result, o.failures, o.timeToVerdict, o.wall.Round(time.Second))
}

// guestFaultsLane writes a copy of lanes/sim-node.yaml with guestFaultPools beside md0 and the
// pools ceiling guestFaultCeiling (its job cap grown by what the ceiling is), and returns its
// path.
func guestFaultsLane(t *testing.T, root string) string {
	t.Helper()
	return laneCopy(t, root, "sim-node", "sim-node", func(top *yaml.Node) {
		growJobCap(t, top, guestFaultCeiling-setPoolsCeiling(t, top, guestFaultCeiling))
		pools := mapValue(top, "pools")
		if pools == nil || len(pools.Content) != 1 {
			t.Fatal("lanes/sim-node.yaml: want one pool to copy")
		}
		for _, name := range guestFaultPools {
			var p yaml.Node
			b, err := yaml.Marshal(pools.Content[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			pool := p.Content[0]
			mapValue(pool, "name").Value = name
			pools.Content = append(pools.Content, pool)
		}
	})
}

// The guest faults' lane copy loads with its three pools, its ceiling and a job cap that holds
// it, and the scenario puts one judged fault on each pool.
func TestGuestFaultsLaneCopy(t *testing.T) {
	root := projectRoot(t)
	l, err := lane.Load(guestFaultsLane(t, root))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Pools) != 1+len(guestFaultPools) {
		t.Fatalf("the copy has %d pools, want %d", len(l.Pools), 1+len(guestFaultPools))
	}
	orig, err := lane.Load(filepath.Join(root, "lanes", "sim-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var origPools time.Duration
	for _, ph := range orig.Budget.Phases {
		if ph.Name == "pools" {
			origPools = ph.Ceiling.D()
		}
	}
	if got, want := l.Budget.JobCap.D(), orig.Budget.JobCap.D()+guestFaultCeiling-origPools; got != want {
		t.Errorf("the copy's jobCap is %s, want %s", got, want)
	}
	set, err := faults.Parse(guestFaultsScenario)
	if err != nil {
		t.Fatal(err)
	}
	targets := poolFaults(l, set)
	for _, p := range l.Pools {
		if len(targets[p.Name]) != 1 {
			t.Errorf("pool %s carries %d judged faults, want one", p.Name, len(targets[p.Name]))
		}
	}
}
