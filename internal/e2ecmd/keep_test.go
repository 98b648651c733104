package e2ecmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/progress"
)

// E2E_KEEP=1 keeps every run; on-failure a red one (a failure of the harness or of a suite, or
// a suite that left no failures.json), never a green or an interrupted one.
func TestKeepKeepsWhatItSays(t *testing.T) {
	l, err := lane.Find("../../lanes", "sim")
	if err != nil {
		t.Fatal(err)
	}
	suiteFailures := func(art string, fs []verdict.Failure) {
		dir := filepath.Join(art, "suites", "kubernetes")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if fs != nil {
			if err := verdict.WriteFailures(filepath.Join(dir, "failures.json"), fs); err != nil {
				t.Fatal(err)
			}
		}
	}
	red := []verdict.Failure{{Pool: "md0", Class: verdict.JoinRejected}}
	cases := []struct {
		name        string
		keep        keepMode
		harness     bool              // the harness failed
		suite       []verdict.Failure // nil: no failures.json
		interrupted bool
		want        bool
	}{
		{"never", keepNever, true, red, false, false},
		{"always, green", keepAlways, false, []verdict.Failure{}, false, true},
		{"always, interrupted", keepAlways, false, []verdict.Failure{}, true, true},
		{"on-failure, green", keepOnFailure, false, []verdict.Failure{}, false, false},
		{"on-failure, a pool failed", keepOnFailure, false, red, false, true},
		{"on-failure, the harness failed", keepOnFailure, true, []verdict.Failure{}, false, true},
		{"on-failure, the suite left no failures.json", keepOnFailure, false, nil, false, true},
		{"on-failure, interrupted", keepOnFailure, false, red, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &run{opts: runOptions{Keep: c.keep}, lane: l, artifacts: t.TempDir(), ranSuites: true}
			suiteFailures(r.artifacts, c.suite)
			if c.harness {
				r.failures = append(r.failures, verdict.Failure{Class: verdict.Install})
			}
			if got, why := r.keeps(c.interrupted); got != c.want || got != (why != "") {
				t.Fatalf("keeps %v (%q), want %v", got, why, c.want)
			}
		})
	}
}

// accessible is a substrate that says how to reach it.
type accessible struct{ name string }

func (a accessible) Name() string                                                { return a.name }
func (a accessible) Preflight(context.Context) error                             { return nil }
func (a accessible) Up(context.Context, *budget.Clock) (*cluster.Cluster, error) { return nil, nil }
func (a accessible) Down(context.Context) error                                  { return nil }
func (a accessible) Describe() []string                                          { return []string{"kind cluster x kept", "  kubeconfig: /k"} }

// The block a kept run prints says how to reach the management and tenant clusters, names the
// namespace and the failed pool's objects, the commands to look, and the one that tears down.
func TestAKeptRunSaysHowToReachEverything(t *testing.T) {
	l, err := lane.Find("../../lanes", "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	work, art := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "management.kubeconfig"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(art, "suites", "kubernetes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k := verdict.Kept{Reason: "E2E_KEEP=on-failure and the run failed", Tenant: "e2eab1", Namespace: "tenant-e2eab1",
		Clusters: []verdict.KeptCluster{{Name: "kubernetes-pools-ab1", Kubeconfig: "/w/tenant.kubeconfig"}, {Name: "kubernetes-refusals-ab1"}},
		Pools: []verdict.KeptPool{{Pool: "md0", Failure: "join-rejected at join", MachineDeployment: "kubernetes-pools-ab1-md0",
			Machines: []string{"m1", "m2"}, VMIs: []string{"m1", "m2"}}}}
	if err := k.Write(filepath.Join(dir, verdict.KeptFile)); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	con := progress.NewConsole(progress.Options{Out: &out})
	r := &run{opts: runOptions{Lane: "kubernetes"}, lane: l, artifacts: art, work: work, sub: accessible{"kind"}, con: con}
	con.Close()
	r.keep("E2E_KEEP=on-failure and the run failed")
	mgmt := filepath.Join(work, "management.kubeconfig")
	want := []string{
		"kept (E2E_KEEP=on-failure and the run failed): nothing was torn down",
		"  management cluster: export KUBECONFIG=" + mgmt,
		"  tenant cluster kubernetes-pools-ab1: export KUBECONFIG=/w/tenant.kubeconfig",
		"  namespace tenant-e2eab1 (Tenant e2eab1 in tenant-root) on the management cluster",
		"  failed pool md0 (join-rejected at join): MachineDeployment kubernetes-pools-ab1-md0; Machines m1, m2; VMIs m1, m2",
		"  kubectl --kubeconfig " + mgmt + " -n tenant-e2eab1 get machines.cluster.x-k8s.io,kubevirtmachines.infrastructure.cluster.x-k8s.io,virtualmachineinstances.kubevirt.io,datavolumes.cdi.kubevirt.io",
		"  clusterctl describe cluster kubernetes-pools-ab1 -n tenant-e2eab1 --kubeconfig " + mgmt,
		"  the kind substrate:",
		"    kind cluster x kept",
		"    kubeconfig: /k",
		"  tear it all down: bin/e2e down --lane kubernetes --work " + work,
	}
	if got := strings.TrimRight(out.String(), "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("printed:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if !r.keptPast {
		t.Error("a kept kind cluster outlives the process, and its work folder must stay")
	}
}

// e2e down removes only a run's own work folder, says a sim lane has nothing to tear down, and
// refuses an existing lane (the harness never deletes that cluster).
func TestDownRemovesOnlyWhatARunKept(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"down"}, &out, &errb); code != exitConfig || !strings.Contains(errb.String(), "--lane is required") {
		t.Fatalf("no lane: exit %d %s", code, errb.String())
	}
	errb.Reset()
	if code := dispatch(context.Background(), []string{"down", "--lane", "sim", "--work", "/etc"}, &out, &errb); code != exitConfig ||
		!strings.Contains(errb.String(), "not a run's work folder") {
		t.Fatalf("--work /etc: exit %d %s", code, errb.String())
	}
	work, err := os.MkdirTemp("", "cozy-e2e-sim-")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := dispatch(context.Background(), []string{"down", "--lane", "sim", "--work", work}, &out, &errb); code != exitPass ||
		!strings.Contains(out.String(), "Ctrl-C that run ends them") || !strings.Contains(out.String(), work+" removed") {
		t.Fatalf("sim: exit %d %s %s", code, out.String(), errb.String())
	}
	if _, err := os.Stat(work); err == nil {
		t.Fatalf("%s is still there", work)
	}
}
