package lanescmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckPrintsSumsAndHeadroom(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"check", "--dir", "../../lanes"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	files, err := filepath.Glob("../../lanes/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("lanes: %v %v", files, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if !strings.Contains(out.String(), name+" ") || !strings.Contains(out.String(), "headroom") {
			t.Errorf("lane %s has no ok line with its headroom:\n%s", name, out.String())
		}
	}
}

// The kind lifecycle lane holds its lifecycle phases to the floors of the real chart's
// timeouts: a remediation ceiling under nodeMonitorGracePeriod 50s + readyUnknownTimeout 30s +
// nodeStartupTimeout 10m + 1m30s is refused with that arithmetic.
func TestCheckHoldsTheKindLifecycleLaneToTheChartsTimeouts(t *testing.T) {
	msg := checkEdited(t, "kubernetes-lifecycle", "    - name: remediation\n      cluster: lifecycle\n      ceiling: 13m\n", "    - name: remediation\n      cluster: lifecycle\n      ceiling: 12m\n")
	want := "ceiling: 12m0s is shorter than 12m50s, the least phase remediation of suite kubernetes can hold (nodeMonitorGracePeriod 50s + readyUnknownTimeout 30s + nodeStartupTimeout 10m0s + margin 1m30s"
	if !strings.Contains(msg, want) {
		t.Fatalf("message lacks %q:\n%s", want, msg)
	}
}

// A kind lane's runner must hold the worker VMs its suites run at once: seven 4 GiB workers
// with KubeVirt's overhead do not fit in 16 GiB.
func TestCheckHoldsAKindLaneToItsPeakWorkers(t *testing.T) {
	msg := checkEdited(t, "kubernetes-lifecycle", "memoryGiB: 64\n", "memoryGiB: 16\n")
	want := "runner.memoryGiB: 16 GiB cannot hold the 13 worker VMs the suites run at once (11 in the pools of join-v1-35 3 + join-v1-34 3 + lifecycle 5, every cluster at once, then at most +2"
	if !strings.Contains(msg, want) || !strings.Contains(msg, "4.5 GiB each: 58.5 GiB") {
		t.Fatalf("message lacks %q and the arithmetic:\n%s", want, msg)
	}
}

// The kind lane's clusters at every version the chart offers (five, three workers each) do
// not fit its runner: refused with the arithmetic summed over the clusters, which all run at
// once.
func TestCheckSumsTheWorkersOfEveryVersionsCluster(t *testing.T) {
	msg := checkEdited(t, "kubernetes", "    versions:\n      newest: 2\n", "    versions: offered\n")
	want := "runner.memoryGiB: 64 GiB cannot hold the 15 worker VMs the suites run at once (15 in the pools of join-v1-35 3 + join-v1-34 3 + join-v1-33 3 + join-v1-32 3 + join-v1-31 3, every cluster at once), 4.5 GiB each: 67.5 GiB"
	if !strings.Contains(msg, want) {
		t.Fatalf("message lacks %q:\n%s", want, msg)
	}
}

// A sim lane's workers must fit the sim's management Nodes: one that does not is refused
// before any phase, with the arithmetic, exit 2.
func TestCheckHoldsASimLaneToTheSimsNodes(t *testing.T) {
	msg := checkEdited(t, "sim", "  - name: md0\n    class: talos\n    replicas: 2\n", "  - name: md0\n    class: talos\n    replicas: 80\n")
	for _, want := range []string{"sim.yaml:", "pools: 82 worker VMs at once (82 in the pools of pools 80 + classes 2, every cluster at once), each asking 4406Mi memory and 105m cpu in its virt-launcher Pod, do not fit the sim's management Nodes (3 Nodes of 8 cpu, 320Gi memory and 110 pods)",
		"one holds 74 (Node sim-worker-1: 320Gi memory / 4406Mi = 74); run at most 74 workers at once"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("message lacks %q:\n%s", want, msg)
		}
	}
}

// The plan says a lane's peak worker VMs against what holds them: a kind lane's runner, a sim
// lane's management Nodes.
func TestPlanSaysTheWorkerVMs(t *testing.T) {
	for name, want := range map[string]string{
		"kubernetes-lifecycle": "\nworkers\n  13 worker VMs at most (11 in the pools of join-v1-35 3 + join-v1-34 3 + lifecycle 5, every cluster at once",
		"sim":                  "\nworkers\n  4 worker VMs at most (4 in the pools of pools 2 + classes 2, every cluster at once), 4406Mi memory and 105m cpu each: the sim's Nodes (3 Nodes of 8 cpu, 320Gi memory and 110 pods) hold 74 on any one Node",
	} {
		var out, errb bytes.Buffer
		if code := run([]string{"plan", "--dir", "../../lanes", "--lane", name}, &out, &errb); code != 0 {
			t.Fatalf("plan %s: exit %d: %s", name, code, errb.String())
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan %s lacks %q:\n%s", name, want, out.String())
		}
	}
}

// checkEdited runs the check on a folder holding only the shipped lane name with from replaced
// by to, wants it refused (exit 2) and returns what it said.
func checkEdited(t *testing.T, name, from, to string) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile("../../lanes/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), from, to, 1)
	if edited == string(data) {
		t.Fatalf("lanes/%s.yaml has no %q to replace; update the test", name, from)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check", "--dir", dir}, &out, &errb); code != 2 {
		t.Fatalf("lanes/%s.yaml with %q for %q: exit %d, want 2: %s", name, to, from, code, out.String())
	}
	return errb.String()
}

// A broken lane makes the check exit non-zero naming the file and the field.
func TestCheckRefusesABrokenLane(t *testing.T) {
	msg := checkEdited(t, "sim", "ceiling: 10s", "ceiling: ten seconds")
	if !strings.Contains(msg, string(filepath.Separator)+"sim.yaml:") || !strings.Contains(msg, `budget.phases[0].ceiling: "ten seconds" is not a duration`) {
		t.Fatalf("message does not name file and field:\n%s", msg)
	}
}

func TestWorkflowCheckReportsDrift(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e2e.yaml")
	if err := os.WriteFile(path, []byte("name: e2e\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"workflow", "check", "--dir", "../../lanes", "--out", path}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(errb.String(), "run `make workflows`") {
		t.Fatalf("message: %s", errb.String())
	}
	if code := run([]string{"workflow", "write", "--dir", "../../lanes", "--out", path}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	if code := run([]string{"workflow", "check", "--dir", "../../lanes", "--out", path}, &out, &errb); code != 0 {
		t.Fatalf("fresh workflow reported as drifted: %s", errb.String())
	}
}

// A lane that runs a suite without one of the suite's phases is refused, naming the phase and
// the suite; an unknown suite is refused with the known ones.
func TestCheckRefusesALaneMissingASuitePhase(t *testing.T) {
	if msg := checkEdited(t, "sim", "    - name: refusals\n      ceiling: 1m\n", ""); !strings.Contains(msg, `budget.phases: has no phase "refusals", which suite kubernetes runs in`) {
		t.Fatalf("message:\n%s", msg)
	}
	if msg := checkEdited(t, "sim", "  - name: kubernetes\n", "  - name: kubernetess\n"); !strings.Contains(msg, `suites[0].name: "kubernetess" is not a suite of this harness (suites: kubernetes)`) {
		t.Fatalf("message:\n%s", msg)
	}
}

// A phase a suite enters once per pool counts once per pool in the check's ok line and in the
// plan, as the fit check counts it: nodelabels' labels, 20s, on the sim lane's three pools.
func TestThePerPoolPhasesCountAsOftenAsTheyRun(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"check", "--dir", "../../examples/nodelabels/lanes"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := "per-pool 40s (phase labels of suite nodelabels runs once per pool, 3 times, so 40s more)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("lanes check said:\n%s\nwant %q", out.String(), want)
	}
	out.Reset()
	if code := run([]string{"plan", "--lane", "../../examples/nodelabels/lanes/sim-nodelabels.yaml"}, &out, &errb); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "per-pool phases") || !strings.Contains(out.String(), want) {
		t.Errorf("lanes plan has no per-pool section saying %q:\n%s", want, out.String())
	}
}
