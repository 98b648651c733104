package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// skippedJUnit is what Ginkgo writes for a passed spec that skipped one check: the check is a
// report entry (suiterun.SkipCheck), a property of the spec's testcase with its value in JSON.
const skippedJUnit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="1" disabled="0" errors="0" failures="0" time="2.5">
  <testsuite name="mysuite" package="/tmp/mysuite" tests="1" disabled="0" skipped="0" errors="0" failures="0" time="2.5">
    <testcase name="[It] mysuite pool md0 every worker Node runs one kubelet version" classname="mysuite" status="passed" time="2.5">
      <properties>
        <property name="pool" value="&#34;md0&#34;"></property>
        <property name="skipped-check" value="{&#34;spec&#34;:&#34;mysuite pool md0 every worker Node runs one kubelet version&#34;,&#34;pool&#34;:&#34;md0&#34;,&#34;check&#34;:&#34;instance-type label&#34;,&#34;reason&#34;:&#34;Node w1 has no node.kubernetes.io/instance-type label&#34;}"></property>
      </properties>
    </testcase>
  </testsuite>
</testsuites>
`

// A check a spec skipped shows as skipped, with its reason, in verdict.json, junit.xml (a
// skipped testcase of its own beside the spec's, which passed), summary.md and report.html,
// and the run still passes.
func TestASkippedCheckShowsAsSkippedWithItsReason(t *testing.T) {
	dir, o := fakeRun(t, false)
	sdir := filepath.Join(dir, "suites", "mysuite")
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := verdict.WriteFailures(filepath.Join(sdir, "failures.json"), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sdir, "junit.xml"), []byte(skippedJUnit), 0o644); err != nil {
		t.Fatal(err)
	}
	o.Suites = []string{"mysuite"}
	v, err := Write(o)
	if err != nil {
		t.Fatal(err)
	}
	if v.Result != verdict.Pass {
		t.Fatalf("a skipped check failed the run: %s %s", v.Result, v.Reason)
	}
	const reason = "Node w1 has no node.kubernetes.io/instance-type label"
	got, err := verdict.ReadVerdict(filepath.Join(dir, "verdict.json"))
	if err != nil {
		t.Fatal(err)
	}
	if js := read(t, dir, "verdict.json"); !strings.Contains(js, `"skipped": [`) || !strings.Contains(js, `"check": "instance-type label"`) ||
		!strings.Contains(js, `"reason": "`+reason+`"`) || !strings.Contains(js, `"skipped": 1`) || len(got.Failures) != 0 {
		t.Errorf("verdict.json does not list the skipped check with its reason:\n%s", js)
	}
	j, err := ReadJUnit(filepath.Join(dir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var spec, check *Case
	for _, s := range j.Suites {
		for i, c := range s.Cases {
			switch c.Name {
			case "[It] mysuite pool md0 every worker Node runs one kubelet version":
				spec = &s.Cases[i]
			case "[It] mysuite pool md0 every worker Node runs one kubelet version / check instance-type label":
				check = &s.Cases[i]
			}
		}
	}
	if spec == nil || spec.Skipped != nil || spec.Failure != nil {
		t.Errorf("the spec's own testcase is not there as passed: %+v", spec)
	}
	if check == nil || check.Skipped == nil || check.Skipped.Message != reason || check.Status != "skipped" ||
		!hasProp(check.Properties, "pool", "md0") || !hasProp(check.Properties, "check", "instance-type label") {
		t.Errorf("junit.xml has no skipped testcase for the check with its reason: %+v", check)
	}
	if j.Failures != 0 {
		t.Errorf("junit.xml counts %d failures", j.Failures)
	}
	sum := read(t, dir, "summary.md")
	for _, want := range []string{"## Lane sim: PASS (exit 0)", "1 check(s) skipped", "### Skipped checks",
		"| md0 | mysuite pool md0 every worker Node runs one kubelet version | instance-type label | " + reason + " |"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary.md lacks %q:\n%s", want, sum)
		}
	}
	page := read(t, dir, HTMLFile)
	for _, want := range []string{`<h2 id="skipped-checks">Skipped checks</h2>`,
		`<tr class="skipped-check" data-pool="md0"><td>md0</td><td>mysuite pool md0 every worker Node runs one kubelet version</td><td>instance-type label</td><td>` + reason + `</td></tr>`} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}
