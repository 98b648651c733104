package e2ecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/substrate/kind"
)

// keepMode is what E2E_KEEP asks for: nothing, everything, or a red run.
type keepMode string

const (
	keepNever     keepMode = ""
	keepAlways    keepMode = "1"
	keepOnFailure keepMode = "on-failure"
)

// keepEnv reads E2E_KEEP (checked by the knobs first): 1, on-failure, or anything else never.
func keepEnv(v string) keepMode {
	switch keepMode(v) {
	case keepAlways, keepOnFailure:
		return keepMode(v)
	}
	return keepNever
}

// keeps decides, before anything is torn down, whether the run keeps everything (E2E_KEEP): always
// with 1; with on-failure when the run is red (an interrupted run is not judged red).
func (r *run) keeps(interrupted bool) (bool, string) {
	switch r.opts.Keep {
	case keepAlways:
		return true, "E2E_KEEP=1"
	case keepOnFailure:
		if !interrupted && r.red() {
			return true, "E2E_KEEP=on-failure and the run failed"
		}
	}
	return false, ""
}

// red reports whether the run failed so far: a failure of the harness's own, or of a suite (a
// suite that left no failures.json failed too).
func (r *run) red() bool {
	if len(r.failures) > 0 {
		return true
	}
	if !r.ranSuites {
		return false
	}
	for _, s := range r.lane.Suites {
		fs, err := verdict.ReadFailures(filepath.Join(r.artifacts, "suites", s.Name, "failures.json"))
		if err != nil || len(fs) > 0 {
			return true
		}
	}
	return false
}

// keep hands what the run made to a person: it prints, last, how to reach the management
// cluster and each tenant cluster, the failed pools' objects and the command that tears it all
// down. The sim lives in this process, so it stays up until SIGINT or SIGTERM and is torn down
// then; a kind or existing cluster outlives the process.
func (r *run) keep(why string) {
	if r.sub == nil {
		return
	}
	for _, l := range r.reach(why) {
		r.con.Plain(l)
	}
	if r.sub.Name() != "sim" {
		r.keptPast = true
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	<-ctx.Done()
	stop()
	r.down()
}

// reach is the block a person reads to get at what was kept.
func (r *run) reach(why string) []string {
	out := []string{fmt.Sprintf("kept (%s): nothing was torn down", why)}
	mgmt := filepath.Join(r.work, "management.kubeconfig")
	if _, err := os.Stat(mgmt); err != nil {
		mgmt = ""
	}
	if mgmt != "" {
		out = append(out, "  management cluster: export KUBECONFIG="+mgmt)
	}
	var kept []verdict.Kept
	for _, s := range r.lane.Suites {
		if k, err := verdict.ReadKept(filepath.Join(r.artifacts, "suites", s.Name, verdict.KeptFile)); err == nil {
			kept = append(kept, k)
		}
	}
	for _, k := range kept {
		for _, c := range k.Clusters {
			if c.Kubeconfig != "" {
				out = append(out, fmt.Sprintf("  tenant cluster %s: export KUBECONFIG=%s", c.Name, c.Kubeconfig))
			}
		}
		out = append(out, fmt.Sprintf("  namespace %s (Tenant %s in tenant-root) on the management cluster", k.Namespace, k.Tenant))
		for _, p := range k.Pools {
			out = append(out, fmt.Sprintf("  failed pool %s (%s): MachineDeployment %s; Machines %s; VMIs %s", p.Pool, p.Failure,
				p.MachineDeployment, orNone(p.Machines), orNone(p.VMIs)))
		}
		if mgmt != "" {
			kc := " --kubeconfig " + mgmt
			out = append(out, fmt.Sprintf("  kubectl%s -n %s get %s", kc, k.Namespace,
				"machines.cluster.x-k8s.io,kubevirtmachines.infrastructure.cluster.x-k8s.io,virtualmachineinstances.kubevirt.io,datavolumes.cdi.kubevirt.io"))
			for _, c := range k.Clusters {
				if c.Kubeconfig != "" {
					out = append(out, fmt.Sprintf("  clusterctl describe cluster %s -n %s%s", c.Name, k.Namespace, kc))
				}
			}
		}
	}
	if a, ok := r.sub.(substrate.Access); ok {
		out = append(out, "  the "+r.sub.Name()+" substrate:")
		for _, l := range a.Describe() {
			out = append(out, "    "+strings.TrimLeft(l, " "))
		}
	}
	out = append(out, "  tear it all down: "+r.teardownCommand(kept, mgmt))
	return out
}

// teardownCommand is how a person removes what was kept, later.
func (r *run) teardownCommand(kept []verdict.Kept, mgmt string) string {
	switch r.sub.Name() {
	case "sim":
		return fmt.Sprintf("Ctrl-C here (SIGINT or SIGTERM): the sim stops and %s is removed", r.work)
	case "kind":
		return fmt.Sprintf("bin/e2e down --lane %s --work %s", r.opts.Lane, r.work)
	}
	var cmds []string
	for _, k := range kept {
		cmds = append(cmds, fmt.Sprintf("kubectl --kubeconfig %s -n tenant-root delete tenants.apps.cozystack.io %s", orWord(mgmt, "$KUBECONFIG"), k.Tenant))
		if len(k.Classes) > 0 {
			cmds = append(cmds, fmt.Sprintf("kubectl --kubeconfig %s delete nodegroupclasses.cozystack.io %s", orWord(mgmt, "$KUBECONFIG"), strings.Join(k.Classes, " ")))
		}
	}
	return strings.Join(append(cmds, "rm -rf "+r.work), "; ")
}

// cmdDown tears down what a run kept: the kind cluster of the lane, and the run's work folder.
//
//	e2e down --lane <lane> [--work <folder>]
func cmdDown(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("e2e down", flag.ContinueOnError)
	fs.SetOutput(stderr)
	laneArg := fs.String("lane", "", "the lane whose kept cluster to delete (name or file)")
	dir := fs.String("lanes-dir", "lanes", "folder of the lane files")
	work := fs.String("work", "", "the kept run's work folder to remove (kept runs print it)")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	if *laneArg == "" {
		fmt.Fprintln(stderr, "e2e down: --lane is required (example: e2e down --lane kubernetes)")
		return exitConfig
	}
	root, err := projectRoot()
	if err != nil {
		fmt.Fprintf(stderr, "e2e down: %v\n", err)
		return exitConfig
	}
	if !filepath.IsAbs(*dir) {
		*dir = filepath.Join(root, *dir)
	}
	l, err := lane.Find(*dir, *laneArg)
	if err != nil {
		fmt.Fprintf(stderr, "e2e down: --lane %s: %v\n", *laneArg, err)
		return exitConfig
	}
	if err := checkWork(*work); err != nil {
		fmt.Fprintf(stderr, "e2e down: --work %s: %v\n", *work, err)
		return exitConfig
	}
	switch l.Substrate {
	case lane.SubstrateKind:
		name, err := kind.ClusterName(l, os.Getenv)
		if err != nil {
			fmt.Fprintf(stderr, "e2e down: %v\n", err)
			return exitConfig
		}
		deleted, err := kind.Delete(name)
		if err != nil {
			fmt.Fprintf(stderr, "e2e down: %v\n", err)
			return exitFail
		}
		if deleted {
			fmt.Fprintf(stdout, "e2e down: kind cluster %s deleted\n", name)
		} else {
			fmt.Fprintf(stdout, "e2e down: no kind cluster %s\n", name)
		}
	case lane.SubstrateSim:
		fmt.Fprintln(stdout, "e2e down: a sim lane's clusters live in its run's process; Ctrl-C that run ends them")
	default:
		fmt.Fprintf(stderr, "e2e down: lane %s runs on an existing cluster, which the harness never deletes; the kept run printed the kubectl commands that remove its tenant\n", l.Name)
		return exitConfig
	}
	if *work != "" {
		if err := os.RemoveAll(*work); err != nil {
			fmt.Fprintf(stderr, "e2e down: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(stdout, "e2e down: %s removed\n", *work)
	}
	return exitPass
}

// checkWork allows only a run's own work folder (cozy-e2e-<lane>-* in the temp folder) to be
// removed: --work never removes anything else.
func checkWork(work string) error {
	if work == "" {
		return nil
	}
	abs, err := filepath.Abs(work)
	if err != nil {
		return err
	}
	if filepath.Dir(abs) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(filepath.Base(abs), "cozy-e2e-") {
		return errors.New("not a run's work folder (a cozy-e2e-* folder in " + os.TempDir() + "); nothing removed")
	}
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func orWord(s, w string) string {
	if s == "" {
		return w
	}
	return s
}
