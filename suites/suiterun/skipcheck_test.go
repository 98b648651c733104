package suiterun

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/reporters"

	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/report"
)

// A spec that skips one check goes on with the others and passes; the check reaches the JUnit
// Ginkgo writes (the file the orchestrator reads, -ginkgo.junit-report) as a report entry the
// run's reports turn into a skipped check with its reason.
func TestASkippedCheckReachesTheSuitesJUnit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "junit.xml")
	after := false
	Describe("mysuite pool md0", func() {
		It("judges what it can", func() {
			SkipCheck("md0", "instance-type label", "Node w1 has no node.kubernetes.io/instance-type label")
			after = true
		})
	})
	ReportAfterSuite("junit", func(r Report) {
		if err := reporters.GenerateJUnitReport(r, path); err != nil {
			t.Error(err)
		}
	})
	if !RunSpecs(t, "skipped checks") {
		t.Fatal("the spec failed")
	}
	if !after {
		t.Error("the spec stopped at its skipped check")
	}
	j, err := report.ReadJUnit(path)
	if err != nil {
		t.Fatal(err)
	}
	got := report.Skips(&j)
	want := verdict.Skip{Spec: "mysuite pool md0 judges what it can", Pool: "md0", Check: "instance-type label",
		Reason: "Node w1 has no node.kubernetes.io/instance-type label"}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("skipped checks in the suite's JUnit: %+v, want %+v", got, want)
	}
	m := report.MergeJUnit(report.JUnitInput{Lane: "sim", Suites: map[string]*report.Suites{"mysuite": &j}})
	if m.Suites[0].Skipped != 1 || m.Suites[0].Failures != 0 {
		t.Errorf("the merged junit.xml: %d skipped, %d failed; want the check skipped and nothing failed", m.Suites[0].Skipped, m.Suites[0].Failures)
	}
}
