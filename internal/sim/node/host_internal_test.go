package node

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// A kubelet root that is not a node's of this package (no marker: a kubelet of the host's own)
// is refused by name and left as it was: Start takes the host's lock, claimRoot refuses the root,
// and the Stop that follows removes only a root its node claimed. It runs under the host's lock,
// which a real Node of another test process holds while it runs, with KubeletRoot its own.
func TestAKubeletRootNotItsOwnIsLeftAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		testkit.Unavailable(t, "the host's node lock and /var/lib/kubelet need root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), simtest.HostSlotWait+2*time.Minute)
	defer cancel()
	n := &Node{Name: "real-node-0", l: layout{dir: t.TempDir()}, log: io.Discard}
	if err := n.lockHost(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { n.lock.Close() }()
	if _, err := os.Stat(KubeletRoot); err == nil {
		t.Fatalf("%s is there under the host's node lock: a kubelet of this host holds it, not a node of this package", KubeletRoot)
	}
	keep := filepath.Join(KubeletRoot, "pods", "keep")
	if err := os.MkdirAll(filepath.Dir(keep), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(KubeletRoot) }() // before the lock is let go
	if err := os.WriteFile(keep, []byte("the host's"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := n.claimRoot()
	if err == nil || !strings.Contains(err.Error(), KubeletRoot+" is there and is not this package's nodes'") {
		t.Fatalf("claiming a kubelet root not its own: %v, want it refused by name", err)
	}
	if n.claimed {
		t.Error("a refused root is marked claimed: Stop would remove it")
	}
	if data, err := os.ReadFile(keep); err != nil || string(data) != "the host's" {
		t.Errorf("the refused root was touched: %q, %v", data, err)
	}
}
