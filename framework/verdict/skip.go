package verdict

import (
	"encoding/json"
	"fmt"
	"strings"
)

// SkipEntry is the name of the report entry (Ginkgo's AddReportEntry, a property of the spec's
// testcase in the suite's junit.xml) that carries one skipped check of a spec, as a Skip in
// JSON: suiterun.SkipCheck writes it, the run's reports read it.
const SkipEntry = "skipped-check"

// Skip is one check inside a spec that the spec could not judge and skipped, with the reason;
// the spec's other checks were judged. A skipped check fails nothing: the verdict lists it, and
// junit.xml, summary.md and report.html show it as skipped with its reason.
type Skip struct {
	// Spec is the full text of the spec the check belongs to.
	Spec string `json:"spec"`
	// Pool is the pool the check was about; empty when it was about no single pool.
	Pool string `json:"pool,omitempty"`
	// Check names the check ("instance-type label").
	Check  string `json:"check"`
	Reason string `json:"reason"`
}

// Line is the skipped check in one line: where (pool or spec), the check and why.
func (s Skip) Line() string {
	head := s.Spec
	if s.Pool != "" {
		head = "pool " + s.Pool
	}
	parts := []string{}
	for _, p := range []string{head, "check " + s.Check + " skipped", s.Reason} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ": ")
}

// ParseSkip reads a Skip from the value of a SkipEntry property (JSON); spec, when the value
// names none, is the spec of the testcase that carried it.
func ParseSkip(value, spec string) (Skip, error) {
	var s Skip
	if err := json.Unmarshal([]byte(value), &s); err != nil {
		return Skip{}, fmt.Errorf("property %s: not a skipped check: %w", SkipEntry, err)
	}
	if s.Check == "" || s.Reason == "" {
		return Skip{}, fmt.Errorf("property %s: a skipped check needs its check and its reason: %s", SkipEntry, value)
	}
	if s.Spec == "" {
		s.Spec = spec
	}
	return s, nil
}
