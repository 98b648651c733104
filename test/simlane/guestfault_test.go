package simlane

import (
	"path/filepath"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

// guestFaultCeiling is the pools phase's ceiling of the real Node's lane under a guest fault
// judged at the deadline: long enough for the worker to reach join on a loaded machine (the
// disk's import, the VM's start, its boot under TCG: about 45 s quiet), short enough to keep the
// run near 5 minutes.
const guestFaultCeiling = 3 * time.Minute

// guest-ca-wrong on the real Node's lane: the pool's Talos machine configuration names a CA that
// did not sign the tenant's apiserver. The real kubelet inside the VM cannot verify it; with
// rotateCertificates, as Talos runs it, it retries in the background and never exits, since the
// apiserver never answers it, so the console stays silent. The pool fails at join at the pools
// phase's deadline with no CSR (runLane's checks: expect). The lane is a copy of sim-node with a
// shorter pools ceiling.
func TestTheRealNodeLaneJudgesAGuestGivenTheWrongCA(t *testing.T) {
	realNodePreflight(t)
	root := projectRoot(t)
	l, err := lane.Load(filepath.Join(root, "lanes", "sim-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	short := laneCopy(t, root, "sim-node", "sim-node", func(top *yaml.Node) { setPoolsCeiling(t, top, guestFaultCeiling) })
	bin := buildOrchestrator(t, root)
	tmp := shortTmp(t)
	o := runLane(t, root, bin, l, short, string(faults.GuestCAWrong)+"@md0", "TMPDIR="+tmp)
	t.Logf("%s: %s, %d failure(s), verdict %s after the deadline, wall %s", o.name, o.result, o.failures, o.timeToVerdict, o.wall.Round(time.Second))
}
