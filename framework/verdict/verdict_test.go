package verdict

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestDecideResultsAndExitCodes(t *testing.T) {
	soft, err := NewPolicy([]string{"deadline"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := Failure{Spec: "pool md0 joins", Pool: "md0", Class: Deadline, Stage: "ready", Message: "stuck", At: t0}
	disk := Failure{Spec: "pool kairos joins", Pool: "kairos", Class: DiskImport, Stage: "disk-import", Message: "401", At: t0.Add(time.Second)}
	cases := []struct {
		name        string
		in          Input
		result      Result
		code        int
		firstPool   string
		reasonStart string
	}{
		{"green", Input{Policy: soft}, Pass, ExitPass, "", ""},
		{"hard", Input{Failures: []Failure{disk}}, Fail, ExitFail, "kairos", "pool kairos: disk-import: 401"},
		{"soft only", Input{Policy: soft, Failures: []Failure{deadline}}, SoftFail, ExitSoft, "md0", "soft only: pool md0"},
		{"hard beats soft and comes first", Input{Policy: soft, Failures: []Failure{deadline, disk}}, Fail, ExitFail, "kairos", "pool kairos"},
		{"preflight", Input{Policy: soft, Failures: []Failure{{Spec: "preflight", Class: Preflight, Message: "no /dev/kvm", At: t0}}}, Fail, ExitConfig, "", "preflight: no /dev/kvm"},
		{"interrupted", Input{Failures: []Failure{disk}, Interrupted: true, Signal: "SIGINT"}, Interrupted, ExitInterrupted, "kairos", "interrupted by SIGINT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Lane = "sim"
			v := Decide(c.in)
			if v.Result != c.result || v.ExitCode != c.code {
				t.Fatalf("result %s exit %d, want %s %d", v.Result, v.ExitCode, c.result, c.code)
			}
			if c.firstPool != "" && v.Failures[0].Pool != c.firstPool {
				t.Fatalf("first failure %+v", v.Failures[0])
			}
			if !strings.HasPrefix(v.Reason, c.reasonStart) {
				t.Fatalf("reason %q, want it to start with %q", v.Reason, c.reasonStart)
			}
		})
	}
}

func TestPolicyRefusesUnknownAndNeverSoftClasses(t *testing.T) {
	if _, err := NewPolicy([]string{"flaky"}); err == nil || !strings.Contains(err.Error(), `policy.soft[0]: "flaky" is not a failure class`) {
		t.Fatalf("unknown class: %v", err)
	}
	if _, err := NewPolicy([]string{"deadline", "harness"}); err == nil || !strings.Contains(err.Error(), "policy.soft[1]") {
		t.Fatalf("never-soft class: %v", err)
	}
	p, _ := NewPolicy([]string{"deadline"})
	if !p.IsSoft(Deadline) || p.IsSoft(DiskImport) || (Policy{Soft: []Class{Harness}}).IsSoft(Harness) {
		t.Fatal("IsSoft")
	}
}

func TestVerdictRoundTripKeepsTheContractFields(t *testing.T) {
	v := Decide(Input{Lane: "sim", RunID: "abc", Failures: []Failure{{Spec: "s", Pool: "md0", Class: Identity, Stage: "provider-id", Message: "m", Evidence: []string{"pools/md0/identity.txt"}, At: t0}}})
	path := filepath.Join(t.TempDir(), "verdict.json")
	if err := v.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadVerdict(path)
	if err != nil {
		t.Fatal(err)
	}
	f := back.Failures[0]
	if back.Lane != "sim" || back.Result != Fail || f.Spec != "s" || f.Pool != "md0" || f.Class != Identity || f.Stage != "provider-id" ||
		f.Message != "m" || len(f.Evidence) != 1 {
		t.Fatalf("round trip: %+v", back)
	}
}

// A failure's line names its pool or spec, class and stage once each: never a class as its own
// location, never what the message already opens with.
func TestFailureLineSaysEachPartOnce(t *testing.T) {
	cases := []struct {
		f    Failure
		want string
	}{
		{Failure{Pool: "kairos", Class: DiskImport, Stage: "disk-import", Message: "401"}, "pool kairos: disk-import: 401"},
		{Failure{Pool: "md0", Class: Identity, Stage: "provider-id", Message: "no providerID"}, "pool md0: identity at provider-id: no providerID"},
		// A join's StageError opens with the pool, class and stage itself.
		{Failure{Spec: "kubernetes pool md0 joins", Pool: "md0", Class: JoinRejected, Stage: "join",
			Message: "pool md0: join-rejected at join: Machine m: kubeadm join refused"}, "pool md0: join-rejected at join: Machine m: kubeadm join refused"},
		{Failure{Pool: "md0", Class: Deadline, Stage: "disk-import", Message: "pool md0: stuck at disk-import for 2m0s of 2m0s: 3.14%"},
			"pool md0: deadline: stuck at disk-import for 2m0s of 2m0s: 3.14%"},
		{Failure{Spec: "harness configuration", Class: Configuration, Stage: "configuration", Message: "E2E_SIM_FAULT: unknown fault"},
			"configuration: E2E_SIM_FAULT: unknown fault"},
		{Failure{Spec: "harness preflight", Class: Preflight, Stage: "preflight", Message: "preflight (sim): the tools are not built"},
			"preflight (sim): the tools are not built"},
		{Failure{Spec: "teardown", Class: Teardown, Stage: "teardown", Message: "PVC x left"}, "teardown: PVC x left"},
		{Failure{Spec: "suite kubernetes", Class: Harness, Stage: "suites", Message: "the suite wrote no failures.json"},
			"suite kubernetes: harness at suites: the suite wrote no failures.json"},
		{Failure{Spec: "kubernetes [BeforeAll]", Class: Install, Stage: "tenant", Message: "tenant: tenant control plane x: refused"},
			"kubernetes [BeforeAll]: install: tenant: tenant control plane x: refused"},
	}
	for _, c := range cases {
		if got := c.f.Line(); got != c.want {
			t.Errorf("%+v:\n got %q\nwant %q", c.f, got, c.want)
		}
	}
}

// Each conformance cluster is judged on its own pools' failures: a failure in one cluster's pool
// leaves another's verdict clean, and a failure of no pool touches none.
func TestEachClusterIsJudgedOnItsOwnPools(t *testing.T) {
	v := Decide(Input{Lane: "sim", Clusters: []Cluster{
		{Name: "pools", Version: "v1.34", Patch: "v1.34.9", Pools: []string{"md0"}},
		{Name: "classes", Version: "v1.35", Patch: "v1.35.6", Pools: []string{"kairos", "acme"}},
	}, Failures: []Failure{
		{Pool: "kairos", Class: DiskImport, Stage: "disk-import", Message: "refused"},
		{Spec: "refusals", Class: ProductAssertion, Message: "not refused"},
	}})
	if v.Result != Fail || len(v.Clusters) != 2 {
		t.Fatalf("verdict %s, clusters %+v", v.Result, v.Clusters)
	}
	if c := v.Clusters[0]; c.Name != "pools" || c.Result != Pass || c.Failures != 0 || c.Version != "v1.34" {
		t.Errorf("the clean cluster: %+v", c)
	}
	if c := v.Clusters[1]; c.Result != Fail || c.Failures != 1 {
		t.Errorf("the failed cluster: %+v", c)
	}
	soft := Decide(Input{Policy: Policy{Soft: []Class{DiskImport}}, Clusters: []Cluster{{Name: "c", Pools: []string{"kairos"}}},
		Failures: []Failure{{Pool: "kairos", Class: DiskImport}}})
	if soft.Clusters[0].Result != SoftFail {
		t.Errorf("soft only: %+v", soft.Clusters[0])
	}
}
