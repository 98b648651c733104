package simlane

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

// guestFaultCeiling is the pools phase's ceiling of the real Node's lane under a guest fault:
// the guest's kubelet gives up its TLS bootstrap a minute after it starts (k8s.io/kubernetes
// v1.35.6 pkg/kubelet/certificate/bootstrap/bootstrap.go:161-167), about 110 s into the phase on
// a quiet machine (the disk's import, the VM's start, its boot under TCG); the ceiling leaves
// room for a loaded one.
const guestFaultCeiling = 3 * time.Minute

// guest-ca-wrong on the real Node's lane: the pool's Talos machine configuration names a CA that
// did not sign the tenant's apiserver. The real kubelet inside the VM cannot verify it, gives up
// its TLS bootstrap and exits, and the OS stand-in says so on the console with the kubelet's own
// x509 error, as machined does, and starts it again. The harness shows that line live as a
// join-rejected suspect and, at the pools phase's deadline, fails the pool at join naming it
// (runLane's checks: expect). The lane is a copy of sim-node with a shorter pools ceiling.
func TestTheRealNodeLaneJudgesAGuestGivenTheWrongCA(t *testing.T) {
	realNodePreflight(t)
	root := projectRoot(t)
	l, err := lane.Load(filepath.Join(root, "lanes", "sim-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	short := laneCopy(t, root, "sim-node", "sim-node", func(top *yaml.Node) { setPoolsCeiling(t, top, guestFaultCeiling) })
	bin := buildOrchestrator(t, root)
	// A short temporary folder: the Node's sockets live under the run's work folder.
	tmp, err := os.MkdirTemp("/tmp", "sn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	o := runLane(t, root, bin, l, short, string(faults.GuestCAWrong)+"@md0", "TMPDIR="+tmp)
	t.Logf("%s: %s, %d failure(s), verdict %s after the deadline, wall %s", o.name, o.result, o.failures, o.timeToVerdict, o.wall.Round(time.Second))
}
