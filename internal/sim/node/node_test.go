package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// nodeHost fails the test under CI when this machine cannot run the real node (CI installs
// containerd, runc and the CNI plugins: .ci/run), so a missing package is never a green run of
// skips; elsewhere it skips, saying what is missing and how to install it.
func nodeHost(t *testing.T) node.Tools {
	t.Helper()
	if err := simulated.NodePreflight(simulated.ThisHost()); err != nil {
		testkit.Unavailable(t, err)
	}
	tools, err := node.FindTools()
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// A real Node: containerd and a kubelet v1.35.4 on this host register with a real apiserver,
// marked so only Pods that must be real land on it (and kwok, which plays annotated Nodes only,
// leaves it alone); a Pod runs on it from images built here and served by the local registry
// (pause as its sandbox, a static binary as its container): Running on the API with a containerd
// container ID and a pod IP from the node's bridge, and a process on the host in a network
// namespace of its own. Killed, containerd and the kubelet are started again; deleted, the Pod's
// process goes.
func TestRealNodeRunsAPod(t *testing.T) {
	tools := nodeHost(t)
	api := cptest.APIServer(t, controlplane.APIServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), simtest.HostSlotWait+5*time.Minute)
	defer cancel()
	c := kubernetes.NewForConfigOrDie(api.Admin())

	reg := registry(ctx, t, tools, testkit.LogWriter(t))
	const payloadRef = "docker.io/library/payload:test"
	if _, err := reg.Push(ctx, payloadRef, payloadImage(t)); err != nil {
		t.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "node-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	before := hostState()
	start := time.Now()
	n, err := node.Start(ctx, node.Options{Name: "real-node-0", Dir: dir, Tools: tools, APIServer: api, Registry: reg, Log: testkit.LogWriter(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Stop()
		if left := leftover(dir, before); left != "" {
			t.Errorf("after Stop: %s", left)
		}
	})
	t.Cleanup(func() { dumpLogs(t, n) })
	if err := n.WaitReady(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Logf("node start to Ready: %s", time.Since(start).Round(100*time.Millisecond))
	checkMarks(ctx, t, c, n.Name)

	token := "token-" + randomHex()
	podStart := time.Now()
	pod := runPod(ctx, t, c, n.Name, payloadRef, token)
	t.Logf("pod create to Running: %s", time.Since(podStart).Round(100*time.Millisecond))
	pid := hostProcess(t, token)
	checkContainer(t, pod, pid, n.Subnet)

	// Outside hands: each process killed is started again, and the node is Ready again.
	cpid, kpid := n.Pids()
	for _, p := range []int{kpid, cpid} {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(ctx, t, "containerd and the kubelet started again", testkit.Left(ctx), testkit.Err(func() error {
		nc, nk := n.Pids()
		rc, rk := n.Restarts()
		if rc < 1 || rk < 1 || nc == 0 || nk == 0 || nc == cpid || nk == kpid {
			return fmt.Errorf("restarts containerd %d kubelet %d, pids %d %d", rc, rk, nc, nk)
		}
		return nil
	}))
	if err := n.WaitReady(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The container outlived both restarts (its shim does not depend on containerd's process).
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the payload process %d is gone after containerd and the kubelet restarted: %v", pid, err)
	}

	// Deleted through the API, the real kubelet stops the container: the process goes.
	if err := c.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(ctx, t, "the Pod gone and its process ended", testkit.Left(ctx), testkit.Err(func() error {
		if _, err := c.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod still there (%v)", err)
		}
		if syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("process %d still runs", pid)
		}
		return nil
	}))
}

func randomHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// payloadImage builds testdata/payload as a static binary and wraps it in a one-layer image.
func payloadImage(t *testing.T) v1.Image { return programImage(t, "payload") }

// programImage builds testdata/<name> as a static binary and wraps it in a one-layer image whose
// entrypoint it is, /bin/<name>.
func programImage(t *testing.T, name string) v1.Image {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building testdata/%s: %v\n%s", name, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	img, err := node.FileImage([]node.File{{Path: "bin/" + name, Mode: 0o755, Content: data}}, v1.Config{Entrypoint: []string{"/bin/" + name}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// A node that died without Stop left its bridge; the next Start, which holds the host's node
// slot, removes it.
func TestStartRemovesTheBridgeADeadNodeLeft(t *testing.T) {
	tools := nodeHost(t)
	const stale = "cze00dead00"
	if out, err := exec.Command("ip", "link", "add", stale, "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("making a bridge as a dead node leaves it: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", stale).Run() })
	api := cptest.APIServer(t, controlplane.APIServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), simtest.HostSlotWait+3*time.Minute)
	defer cancel()
	startNode(ctx, t, tools, api, registry(ctx, t, tools, io.Discard))
	if _, err := os.Stat("/sys/class/net/" + stale); err == nil {
		t.Errorf("the bridge %s a dead node left is still there after Start", stale)
	}
}
