package simlane

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// outsideHand deletes a worker's VMI once while the pools join, with kubectl against the run's
// management cluster (nothing of it is scripted in the harness): the real VM controller starts a
// new VMI (runStrategy Always), the worker joins, and the run is green. It rides on the green
// run of TestSimLaneUnderEachFault (whose run it leaves green), so it costs no run of its own.
type outsideHand struct {
	tmp    string // the run's TMPDIR: its work folder, with the management kubeconfig, goes there
	cancel context.CancelFunc
	done   chan deletion
}

// startOutsideHand starts watching for a Running VMI to delete; the run must get env().
func startOutsideHand(t *testing.T) *outsideHand {
	t.Helper()
	tools, err := controlplane.FindTools()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &outsideHand{tmp: t.TempDir(), cancel: cancel, done: make(chan deletion, 1)}
	go func() { h.done <- deleteOneVMI(ctx, tools.Path("kubectl"), h.tmp) }()
	return h
}

func (h *outsideHand) env() string { return "TMPDIR=" + h.tmp }

// check holds the run o to the deletion: the hand deleted a VMI of the real virt-controller's
// (its managedFields, and its launcher Pod's) and the VM controller started that VM a second
// time. That the run is green runLane checks, as for every green run.
func (h *outsideHand) check(t *testing.T, o outcome) {
	t.Helper()
	h.cancel()
	d := <-h.done
	if d.err != "" {
		t.Errorf("the outside hand: %s", d.err)
		return
	}
	t.Logf("the outside hand deleted VMI %s (UID %s) at %s; kubectl: %s", d.vmi, d.uid, d.at.Format(time.RFC3339Nano), strings.TrimSpace(d.out))
	for what, managers := range map[string][]string{"VMI " + d.vmi: d.vmiManagers, "its launcher Pod": d.launcherManagers} {
		if !contains(managers, "virt-controller") {
			t.Errorf("%s: managedFields name %v, not virt-controller", what, managers)
		}
	}
	t.Logf("managedFields: VMI %v, launcher %v", d.vmiManagers, d.launcherManagers)
	// The real VM controller started the VM a second time, after the deletion: its events
	// (virtualmachine-controller, "Started the virtual machine by creating the new virtual
	// machine instance", kubevirt v1.8.4 pkg/virt-controller/watch/vm/vm.go) in the pool's
	// stream.
	events, _ := filepath.Glob(filepath.Join(o.art, "pools", "*", "events.jsonl"))
	starts := 0
	for _, f := range events {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			var e struct{ Kind, Name, Reason, Message, Source string }
			if json.Unmarshal([]byte(line), &e) == nil && e.Kind == "VirtualMachine" && e.Name == d.vmi &&
				e.Source == "virtualmachine-controller" && strings.Contains(e.Message, "creating the new virtual machine instance") {
				starts++
			}
		}
	}
	if starts < 2 {
		t.Errorf("VirtualMachine %s was started %d time(s) by the VM controller, want a second start after the deletion", d.vmi, starts)
	}
	t.Logf("green in %s with VMI %s deleted once by hand; its VM started %d times", o.wall.Round(time.Second), d.vmi, starts)
}

type deletion struct {
	vmi, uid, out, err            string
	at                            time.Time
	vmiManagers, launcherManagers []string
}

type managed struct {
	Metadata struct {
		ManagedFields []struct{ Manager string } `json:"managedFields"`
	} `json:"metadata"`
}

func (m managed) managers() []string {
	var out []string
	for _, f := range m.Metadata.ManagedFields {
		out = append(out, f.Manager)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// deleteOneVMI waits for the run's management kubeconfig under tmp, then for a Running VMI in a
// tenant namespace, and deletes it once with kubectl.
func deleteOneVMI(ctx context.Context, kubectl, tmp string) deletion {
	for {
		select {
		case <-ctx.Done():
			return deletion{err: "no Running VMI was seen before the run ended"}
		case <-time.After(500 * time.Millisecond):
		}
		cfgs, _ := filepath.Glob(filepath.Join(tmp, "cozy-e2e-sim-*", "sim", "management.kubeconfig"))
		if len(cfgs) == 0 {
			continue
		}
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", cfgs[0], "get", "virtualmachineinstances", "-A", "-o", "json").Output()
		if err != nil {
			continue
		}
		var list struct {
			Items []struct {
				Metadata struct{ Namespace, Name, UID string } `json:"metadata"`
				Status   struct{ Phase string }                `json:"status"`
			} `json:"items"`
		}
		if json.Unmarshal(out, &list) != nil {
			continue
		}
		for _, v := range list.Items {
			if v.Status.Phase != "Running" || !strings.HasPrefix(v.Metadata.Namespace, "tenant-") {
				continue
			}
			var vmi managed
			if raw, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", cfgs[0], "-n", v.Metadata.Namespace, "get",
				"virtualmachineinstance", v.Metadata.Name, "-o", "json", "--show-managed-fields").Output(); err == nil {
				_ = json.Unmarshal(raw, &vmi)
			}
			var pods struct{ Items []managed }
			if raw, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", cfgs[0], "-n", v.Metadata.Namespace, "get", "pods",
				"-l", "kubevirt.io/created-by="+v.Metadata.UID, "-o", "json", "--show-managed-fields").Output(); err == nil {
				_ = json.Unmarshal(raw, &pods)
			}
			var launcher []string
			for _, p := range pods.Items {
				launcher = append(launcher, p.managers()...)
			}
			at := time.Now()
			res, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", cfgs[0], "-n", v.Metadata.Namespace, "delete",
				"virtualmachineinstance", v.Metadata.Name, "--wait=false").CombinedOutput()
			d := deletion{vmi: v.Metadata.Name, uid: v.Metadata.UID, out: string(res), at: at,
				vmiManagers: vmi.managers(), launcherManagers: launcher}
			if err != nil {
				d.err = "kubectl delete: " + err.Error() + ": " + string(res)
			}
			return d
		}
	}
}
