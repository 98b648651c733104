package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/diag"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// ginkgoJUnit is what Ginkgo writes for a suite with one failed and one passed spec.
const ginkgoJUnit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" disabled="0" errors="0" failures="1" time="42.5">
  <testsuite name="kubernetes" package="/work/main/suites/kubernetes" tests="3" disabled="0" skipped="0" errors="0" failures="1" time="42.5" timestamp="2026-12-02T12:00:10">
    <properties><property name="SuiteSucceeded" value="false"></property></properties>
    <testcase name="[BeforeSuite]" classname="kubernetes" status="passed" time="3.1"></testcase>
    <testcase name="[It] kubernetes pool md0 joins [talos, sim]" classname="kubernetes" status="passed" time="20.2"></testcase>
    <testcase name="[It] kubernetes pool kairos joins [kairos, sim]" classname="kubernetes" status="failed" time="9.8">
      <failure message="pool kairos: disk-import at disk-import: DataVolume failed" type="failed">stack</failure>
      <properties><property name="pool" value="&#34;kairos&#34;"></property><property name="owner" value="x"></property></properties>
    </testcase>
  </testsuite>
</testsuites>
`

// clusterTree is a tree as the suite writes it (capitree).
const clusterTree = `# clusterctl describe cluster kubernetes-pools-abc12 -n tenant-e2eabc12
NAME                                  REPLICAS AVAILABLE READY UP TO DATE STATUS   REASON        SINCE MESSAGE
Cluster/kubernetes-pools-abc12        1/1      1         1     1          True     Available     22s
└─Workers
  └─MachineDeployment/kubernetes-pools-abc12-kairos  1/1  0  0  1  False  NotAvailable  23s
`

// fakeRun lays out a run folder as the orchestrator and a suite leave it.
func fakeRun(t *testing.T, failing bool) (string, Options) {
	t.Helper()
	dir := t.TempDir()
	sdir := filepath.Join(dir, "suites", "kubernetes")
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var fs []verdict.Failure
	if failing {
		fs = append(fs, verdict.Failure{Spec: "kubernetes pool kairos joins", Pool: "kairos", Class: verdict.DiskImport, Stage: "disk-import",
			Message: "DataVolume failed: registry answered 401", Evidence: []string{"pools/kairos/datavolumes.txt"}, At: t0.Add(30 * time.Second)})
	}
	if err := verdict.WriteFailures(filepath.Join(sdir, "failures.json"), fs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sdir, "junit.xml"), []byte(ginkgoJUnit), 0o644); err != nil {
		t.Fatal(err)
	}
	suite := budget.Timings{Lane: "sim", Stages: []budget.StageTiming{
		{Pool: "md0", Stage: "bootstrap-template", Start: t0, End: t0.Add(time.Second), Spent: budget.Seconds(time.Second)},
		{Pool: "md0", Stage: "disk-import", Start: t0.Add(time.Second), End: t0.Add(3 * time.Second), Spent: budget.Seconds(2 * time.Second)},
	}, Phases: []budget.PhaseTiming{{Name: "pools", Planned: budget.Seconds(2 * time.Minute), Spent: budget.Seconds(40 * time.Second),
		Start: t0.Add(10 * time.Second), End: t0.Add(50 * time.Second), Outcome: budget.OutcomeOK}},
		Marks: []budget.Mark{{At: t0.Add(20 * time.Second), Subject: "platform virt-controller", What: "restarted", Detail: "signal 9, exit 137: <killed>"},
			{At: t0.Add(32 * time.Second), Subject: "platform virt-controller", What: "available again", Detail: "1/1 Pods ready"}}}
	if failing {
		suite.Phases[0].Outcome, suite.Phases[0].Error = budget.OutcomeFailed, "pool kairos failed"
	}
	if err := suite.Write(filepath.Join(sdir, "timings.json")); err != nil {
		t.Fatal(err)
	}
	m := diag.NewManifest()
	m.Add(diag.Entry{Name: "disk-import", Scope: "pool kairos", Status: diag.Complete, Start: t0, Paths: []string{"pools/kairos/datavolumes.txt"}})
	m.Add(diag.Entry{Name: "resources", Scope: "cluster tenant", Status: diag.Declined, Start: t0, Error: "needs up to 12s, 3s left"})
	if err := m.Write(filepath.Join(sdir, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	trees := map[string]string{"clusters/management/cluster-tree-kubernetes-pools-abc12.txt": clusterTree}
	if failing {
		trees["pools/kairos/cluster-tree.txt"] = clusterTree
	}
	for rel, text := range trees {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lane := filepath.Join(t.TempDir(), "sim.yaml")
	if err := os.WriteFile(lane, []byte("name: sim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	harness := budget.Timings{Lane: "sim", JobStart: t0, Phases: []budget.PhaseTiming{
		{Name: "cluster", Planned: budget.Seconds(time.Minute), Spent: budget.Seconds(8 * time.Second), Start: t0, End: t0.Add(8 * time.Second), Outcome: budget.OutcomeOK},
	}}
	return dir, Options{Dir: dir, Lane: "sim", LaneFile: lane, RunID: "abc12", Suites: []string{"kubernetes"}, Timings: harness,
		Manifest: diag.NewManifest(), Start: t0, End: t0.Add(time.Minute),
		Repro: Repro{Commit: "0123456789abcdef0123456789abcdef01234567", Env: map[string]string{"E2E_SIM_FAULT": "disk-import-refused"}}}
}

func read(t *testing.T, dir, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWriteJudgesAndReportsARedRun(t *testing.T) {
	dir, o := fakeRun(t, true)
	o.Clusters = []verdict.Cluster{{Name: "pools", Version: "v1.34", Patch: "v1.34.9", Pools: []string{"md0"}},
		{Name: "classes", Version: "v1.35", Patch: "v1.35.6", Pools: []string{"kairos"}}}
	v, err := Write(o)
	if err != nil {
		t.Fatal(err)
	}
	if v.Result != verdict.Fail || v.ExitCode != verdict.ExitFail || len(v.Failures) != 1 || v.Failures[0].Class != verdict.DiskImport {
		t.Fatalf("verdict %+v", v)
	}
	if len(v.Clusters) != 2 || v.Clusters[0].Result != verdict.Pass || v.Clusters[1].Result != verdict.Fail {
		t.Fatalf("the clusters' verdicts: %+v", v.Clusters)
	}
	j, err := ReadJUnit(filepath.Join(dir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var failed *Case
	phases := 0
	for _, s := range j.Suites {
		for i, c := range s.Cases {
			if c.Name == "[It] kubernetes pool kairos joins [kairos, sim]" {
				failed = &s.Cases[i]
			}
			if strings.HasPrefix(c.Name, "phase ") {
				phases++
			}
		}
	}
	if failed == nil || failed.Properties == nil || !hasProp(failed.Properties, "class", "disk-import") || !hasProp(failed.Properties, "stage", "disk-import") ||
		!hasProp(failed.Properties, "pool", "kairos") {
		t.Fatalf("the failed testcase lacks its class and stage: %+v", failed)
	}
	pools := 0
	for _, it := range failed.Properties.Items {
		if it.Name == "pool" {
			pools++
		}
	}
	if pools != 1 || !hasProp(failed.Properties, "owner", "x") {
		t.Fatalf("properties %+v: one pool property, the suite's other entries kept", failed.Properties.Items)
	}
	if phases != 2 || j.Failures != 2 { // the failed spec and the failed pools phase
		t.Fatalf("junit: %d phase cases, %d failures", phases, j.Failures)
	}
	sum := read(t, dir, "summary.md")
	for _, want := range []string{"## Lane sim: FAIL (exit 1)", "| kairos | `disk-import` | disk-import | hard |",
		"| pools | `v1.34` (`v1.34.9`) | md0 | pass |", "| classes | `v1.35` (`v1.35.6`) | kairos | fail (1 failure(s)) |", "[pools/kairos/datavolumes.txt](pools/kairos/datavolumes.txt)",
		"**md0**: bootstrap-template 1.0s → disk-import 2.0s (total 3.0s)", "| pools | 120.0s | 40.0s | 33% | failed: pool kairos failed |",
		"1 complete, 0 truncated, 0 failed, 1 declined", "E2E_SIM_FAULT=disk-import-refused E2E_RUN_ID=abc12 make e2e",
		"### Cluster API: clusterctl describe cluster",
		`<details><summary>cluster kubernetes-pools-abc12 (<a href="clusters/management/cluster-tree-kubernetes-pools-abc12.txt">`,
		`<details><summary>failed pool kairos (<a href="pools/kairos/cluster-tree.txt">`,
		"```text\n# clusterctl describe cluster kubernetes-pools-abc12 -n tenant-e2eabc12\nNAME ", "└─MachineDeployment/kubernetes-pools-abc12-kairos"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary.md lacks %q:\n%s", want, sum)
		}
	}
	repro := read(t, dir, "repro.txt")
	if !strings.Contains(repro, `git checkout --detach 0123456789abcdef0123456789abcdef01234567 && E2E_SIM_FAULT=disk-import-refused E2E_RUN_ID=abc12 make e2e LANE="$ARTIFACTS/lane/sim.yaml"`) ||
		read(t, dir, "lane/sim.yaml") != "name: sim\n" {
		t.Fatalf("repro:\n%s", repro)
	}
	tm, err := budget.ReadTimings(filepath.Join(dir, "timings.json"))
	if err != nil || len(tm.Phases) != 2 || tm.Phases[0].Name != "cluster" || len(tm.Stages) != 2 {
		t.Fatalf("merged timings %+v %v", tm, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "baseline.json")); err == nil {
		t.Fatal("a red run must not write a baseline")
	}
}

func hasProp(p *Properties, name, value string) bool {
	for _, it := range p.Items {
		if it.Name == name && it.Value == value {
			return true
		}
	}
	return false
}

// A green run keeps a baseline; a red run given it shows where it stopped and what was slower.
func TestGreenBaselineIsComparedWithARedRun(t *testing.T) {
	gdir, g := fakeRun(t, false)
	v, err := Write(g)
	if err != nil || v.Result != verdict.Pass || v.ExitCode != 0 {
		t.Fatalf("green: %+v %v", v, err)
	}
	_, r := fakeRun(t, true)
	r.Baseline = filepath.Join(gdir, "baseline.json")
	r.Timings.Stages = nil
	// This run reached bootstrap-template slowly and never finished disk-import.
	sdir := filepath.Join(r.Dir, "suites", "kubernetes")
	slow := budget.Timings{Stages: []budget.StageTiming{{Pool: "md0", Stage: "bootstrap-template", End: t0, Spent: budget.Seconds(5 * time.Second)}}}
	if err := slow.Write(filepath.Join(sdir, "timings.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(r); err != nil {
		t.Fatal(err)
	}
	sum := read(t, r.Dir, "summary.md")
	for _, want := range []string{"Compared with the green baseline (run `abc12`", "| md0 | bootstrap-template | 1.0s | 5.0s | **5.0x slower** |",
		"| md0 | disk-import | 2.0s | not reached | **stopped before this** |"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary.md lacks %q:\n%s", want, sum)
		}
	}
}

// A suite that died leaves no failures.json: that is a red harness testcase, never a pass.
func TestASuiteWithoutFailuresJSONFailsTheRun(t *testing.T) {
	dir, o := fakeRun(t, false)
	if err := os.Remove(filepath.Join(dir, "suites", "kubernetes", "failures.json")); err != nil {
		t.Fatal(err)
	}
	v, _ := Write(o)
	if v.Result != verdict.Fail || v.Failures[0].Class != verdict.Harness || !strings.Contains(v.Failures[0].Message, "wrote no failures.json") {
		t.Fatalf("verdict %+v", v)
	}
}

// A secret found in the artifacts fails the run as a harness failure and is scrubbed.
func TestALeakedSecretFailsTheRunAndIsScrubbed(t *testing.T) {
	dir, o := fakeRun(t, false)
	secret := "canary-1234567890abcdef"
	if err := os.WriteFile(filepath.Join(dir, "suites", "kubernetes", "out.log"), []byte("oops "+secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o.Secrets = []string{secret}
	v, _ := Write(o)
	if v.Result != verdict.Fail || v.Failures[0].Class != verdict.Harness || !strings.Contains(v.Failures[0].Message, "suites/kubernetes/out.log") {
		t.Fatalf("verdict %+v", v)
	}
	if err := diag.Scan(dir, secret); err != nil {
		t.Fatalf("still leaking after the scrub: %v", err)
	}
}

// A failed bring-up is a red testcase of its phase, with its class.
func TestAFailedBringUpIsARedPhase(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Lane: "sim", End: t0, Timings: budget.Timings{Phases: []budget.PhaseTiming{
		{Name: "cluster", Outcome: budget.OutcomeFailed, Error: "kube-apiserver exited", Start: t0, End: t0},
		{Name: "tenant", Outcome: budget.OutcomeSkipped, Note: "bring-up failed", Start: t0, End: t0},
	}}, Failures: []verdict.Failure{{Spec: "phase cluster", Class: verdict.Install, Stage: "cluster", Message: "kube-apiserver exited",
		Evidence: []string{"bring-up.txt"}, At: t0}}}
	v, err := Write(o)
	if err != nil || v.ExitCode != verdict.ExitFail {
		t.Fatalf("%+v %v", v, err)
	}
	j, _ := ReadJUnit(filepath.Join(dir, "junit.xml"))
	h := j.Suites[len(j.Suites)-1]
	if h.Name != HarnessSuite || len(h.Cases) != 2 || h.Cases[0].Failure == nil || !hasProp(h.Cases[0].Properties, "class", "install") ||
		h.Cases[1].Skipped == nil {
		t.Fatalf("harness suite %+v", h)
	}
}

// A lane file the orchestrator already copied into the artifacts is used where it lies.
func TestReproUsesALaneCopyInsideTheArtifacts(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "lane"), 0o755); err != nil {
		t.Fatal(err)
	}
	lane := filepath.Join(dir, "lane", "sim.yaml")
	if err := os.WriteFile(lane, []byte("name: sim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := WriteRepro(dir, lane, Repro{Lane: "sim", RunID: "x1"})
	if err != nil || r.LaneFile != "lane/sim.yaml" || !strings.HasSuffix(r.Command, `make e2e LANE="$ARTIFACTS/lane/sim.yaml"`) {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "lane.yaml")); err == nil {
		t.Fatal("copied a lane file already in the artifacts")
	}
}

// summary.md opens with a gantt of the phases and each pool's stages, failures marked crit.
func TestSummaryOpensWithATimeline(t *testing.T) {
	dir, o := fakeRun(t, true)
	if _, err := Write(o); err != nil {
		t.Fatal(err)
	}
	sum := read(t, dir, "summary.md")
	lines := strings.Split(sum, "\n")
	if !strings.HasPrefix(lines[0], "## Lane sim: FAIL") || lines[2] != "```mermaid" || lines[3] != "gantt" {
		t.Fatalf("summary.md does not open with the gantt:\n%s", strings.Join(lines[:min(8, len(lines))], "\n"))
	}
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	for _, want := range []string{
		"    title lane sim fail, run abc12",
		"    dateFormat x",
		"    section phases",
		fmt.Sprintf("    cluster 8.0s :t1, %d, %d", ms(0), ms(8*time.Second)),
		fmt.Sprintf("    pools 40.0s :crit, t2, %d, %d", ms(10*time.Second), ms(50*time.Second)),
		"    section pool kairos",
		// kairos passed no stage: its failure runs from the pools phase's start to the decision.
		fmt.Sprintf("    disk-import 20.0s :crit, t3, %d, %d", ms(10*time.Second), ms(30*time.Second)),
		"    section pool md0",
		fmt.Sprintf("    bootstrap-template 1.0s :t4, %d, %d", ms(0), ms(time.Second)),
		fmt.Sprintf("    disk-import 2.0s :t5, %d, %d", ms(time.Second), ms(3*time.Second)),
		// What the platform did under the pools, from the suite's timings.
		"### Platform under the pools",
		"| 12:00:20 | +20.0s | platform virt-controller | restarted | signal 9, exit 137: <killed> |",
		"| 12:00:32 | +32.0s | platform virt-controller | available again | 1/1 Pods ready |",
	} {
		if !strings.Contains(sum, want+"\n") {
			t.Errorf("the gantt lacks %q:\n%s", want, sum[:min(len(sum), 1200)])
		}
	}
}
