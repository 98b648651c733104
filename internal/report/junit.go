// Package report writes a run's reports from its verdict, timings and manifest: junit.xml (the
// suites' JUnit merged with the harness phases, every testcase carrying its failure class and
// stage as properties), summary.md for $GITHUB_STEP_SUMMARY, the merged timings.json, repro.txt
// and the baseline a green run keeps for red runs to be compared against.
package report

import (
	"encoding/xml"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// JUnit testsuites, in the schema Ginkgo writes and CI tools read, with testcase properties.
type Suites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Name     string   `xml:"name,attr,omitempty"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Disabled int      `xml:"disabled,attr"`
	Time     float64  `xml:"time,attr"`
	Suites   []Suite  `xml:"testsuite"`
}

// Suite is one testsuite.
type Suite struct {
	Name       string      `xml:"name,attr"`
	Package    string      `xml:"package,attr,omitempty"`
	Tests      int         `xml:"tests,attr"`
	Disabled   int         `xml:"disabled,attr"`
	Skipped    int         `xml:"skipped,attr"`
	Errors     int         `xml:"errors,attr"`
	Failures   int         `xml:"failures,attr"`
	Time       float64     `xml:"time,attr"`
	Timestamp  string      `xml:"timestamp,attr,omitempty"`
	Properties *Properties `xml:"properties,omitempty"`
	Cases      []Case      `xml:"testcase"`
}

// Properties is a list of name/value pairs.
type Properties struct {
	Items []Property `xml:"property"`
}

// Property is one name/value pair.
type Property struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// Case is one testcase.
type Case struct {
	Name       string      `xml:"name,attr"`
	Classname  string      `xml:"classname,attr"`
	Status     string      `xml:"status,attr,omitempty"`
	Time       float64     `xml:"time,attr"`
	Skipped    *Message    `xml:"skipped,omitempty"`
	Error      *Message    `xml:"error,omitempty"`
	Failure    *Message    `xml:"failure,omitempty"`
	SystemOut  string      `xml:"system-out,omitempty"`
	SystemErr  string      `xml:"system-err,omitempty"`
	Properties *Properties `xml:"properties,omitempty"`
}

// Message is a skipped, error or failure element.
type Message struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// ReadJUnit reads a JUnit file (a suite's, written by Ginkgo).
func ReadJUnit(path string) (Suites, error) {
	var s Suites
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := xml.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("%s: not a JUnit report: %w", path, err)
	}
	return s, nil
}

// HarnessSuite is the testsuite holding the harness phases.
const HarnessSuite = "harness"

// JUnitInput is what MergeJUnit combines.
type JUnitInput struct {
	Lane string
	// Suites are the suites' own reports, by suite name (nil for a suite that wrote none: the
	// harness failure that says so becomes its red testcase).
	Suites map[string]*Suites
	// Timings are the run's merged timings: each phase becomes a testcase of the harness suite.
	Timings budget.Timings
	// Verdict holds every failure, soft or hard.
	Verdict verdict.Verdict
}

// MergeJUnit merges the suites' reports with a testcase per harness phase. Every testcase a
// failure belongs to gets properties class, stage, pool, soft and evidence; a failure no
// testcase names (a failed bring-up, a suite that crashed) becomes a red testcase of its own.
func MergeJUnit(in JUnitInput) Suites {
	out := Suites{Name: "lane " + in.Lane}
	used := make([]bool, len(in.Verdict.Failures))
	names := make([]string, 0, len(in.Suites))
	for n := range in.Suites {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := in.Suites[n]
		if s == nil {
			continue
		}
		for _, ts := range s.Suites {
			var cases []Case
			for i := range ts.Cases {
				c := &ts.Cases[i]
				if c.Failure != nil || c.Error != nil {
					if fi := matchFailure(c.Name, in.Verdict.Failures, used); fi >= 0 {
						used[fi] = true
						annotate(c, in.Verdict.Failures[fi])
					}
				}
				cases = append(cases, *c)
				cases = append(cases, skippedChecks(*c)...)
			}
			ts.Cases = cases
			ts.Name = firstNonEmpty(ts.Name, n)
			out.Suites = append(out.Suites, ts)
		}
	}
	h := Suite{Name: HarnessSuite, Package: "lane " + in.Lane}
	for _, p := range in.Timings.Phases {
		c := Case{Name: "phase " + p.Label(), Classname: HarnessSuite, Time: p.Spent.D().Seconds(), Status: string(p.Outcome)}
		switch p.Outcome {
		case budget.OutcomeSkipped, budget.OutcomeDeclined:
			c.Skipped = &Message{Message: firstNonEmpty(p.Note, p.Error, string(p.Outcome))}
		case budget.OutcomeFailed, budget.OutcomeDeadline:
			c.Failure = &Message{Message: firstNonEmpty(p.Error, string(p.Outcome)), Type: string(p.Outcome)}
			if fi := matchPhase(p.Name, in.Verdict.Failures, used); fi >= 0 {
				used[fi] = true
				annotate(&c, in.Verdict.Failures[fi])
			}
		}
		h.Cases = append(h.Cases, c)
	}
	for i, f := range in.Verdict.Failures {
		if used[i] {
			continue
		}
		c := Case{Name: firstNonEmpty(f.Spec, "failure"), Classname: HarnessSuite, Status: "failed",
			Failure: &Message{Message: f.Line(), Type: string(f.Class)}}
		annotate(&c, f)
		h.Cases = append(h.Cases, c)
	}
	out.Suites = append(out.Suites, h)
	for i := range out.Suites {
		count(&out.Suites[i])
		out.Tests += out.Suites[i].Tests
		out.Failures += out.Suites[i].Failures
		out.Errors += out.Suites[i].Errors
		out.Disabled += out.Suites[i].Disabled
		out.Time += out.Suites[i].Time
	}
	return out
}

// skippedChecks are a testcase's skipped checks (its verdict.SkipEntry properties), each a
// skipped testcase of its own beside it: "<the spec's case> / check <check>", with the reason
// as the skipped message and the pool and check as properties. A property that is no skipped
// check is left alone (it stays a property of the spec's case).
func skippedChecks(c Case) []Case {
	var out []Case
	for _, s := range caseSkips(c) {
		out = append(out, Case{Name: c.Name + " / check " + s.Check, Classname: c.Classname, Status: "skipped",
			Skipped:    &Message{Message: s.Reason},
			Properties: &Properties{Items: []Property{{"check", s.Check}, {"pool", s.Pool}}}})
	}
	return out
}

// caseSkips reads a testcase's skipped checks.
func caseSkips(c Case) []verdict.Skip {
	if c.Properties == nil {
		return nil
	}
	var out []verdict.Skip
	for _, p := range c.Properties.Items {
		if p.Name != verdict.SkipEntry {
			continue
		}
		if s, err := verdict.ParseSkip(p.Value, specText(c.Name)); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// Skips are the checks the specs of a suite's report skipped (suiterun.SkipCheck), in order.
func Skips(s *Suites) []verdict.Skip {
	if s == nil {
		return nil
	}
	var out []verdict.Skip
	for _, ts := range s.Suites {
		for _, c := range ts.Cases {
			out = append(out, caseSkips(c)...)
		}
	}
	return out
}

// specText is a Ginkgo testcase's spec text: its name without the "[It] " before it.
func specText(caseName string) string {
	if strings.HasPrefix(caseName, "[") {
		if i := strings.Index(caseName, "] "); i > 0 {
			return caseName[i+2:]
		}
	}
	return caseName
}

// matchFailure finds the unused failure a testcase is about: Ginkgo names a testcase
// "[It] <full spec text> [labels]" and a suite names its failure by the full spec text.
func matchFailure(caseName string, fs []verdict.Failure, used []bool) int {
	text := specText(caseName)
	for i, f := range fs {
		if used[i] || f.Spec == "" {
			continue
		}
		if text == f.Spec || strings.HasPrefix(text, f.Spec+" [") || caseName == f.Spec {
			return i
		}
	}
	return -1
}

// matchPhase finds the unused failure of a harness phase (no pool, stage or spec naming it).
func matchPhase(phase string, fs []verdict.Failure, used []bool) int {
	for i, f := range fs {
		if !used[i] && f.Pool == "" && (f.Stage == phase || f.Spec == "phase "+phase || f.Spec == phase) {
			return i
		}
	}
	return -1
}

func annotate(c *Case, f verdict.Failure) {
	props := []Property{{"class", string(f.Class)}, {"stage", f.Stage}, {"pool", f.Pool},
		{"soft", fmt.Sprint(f.Soft)}, {"evidence", strings.Join(f.Evidence, " ")}}
	if c.Properties == nil {
		c.Properties = &Properties{}
	}
	// The verdict's values replace a suite's own report entries of the same name.
	kept := c.Properties.Items[:0]
	for _, it := range c.Properties.Items {
		switch it.Name {
		case "class", "stage", "pool", "soft", "evidence":
		default:
			kept = append(kept, it)
		}
	}
	c.Properties.Items = append(kept, props...)
	if f.Soft && c.Failure != nil {
		c.Failure.Type = "soft:" + string(f.Class)
	}
}

func count(s *Suite) {
	s.Tests, s.Failures, s.Errors, s.Skipped, s.Time = len(s.Cases), 0, 0, 0, 0
	for _, c := range s.Cases {
		s.Time += c.Time
		switch {
		case c.Failure != nil:
			s.Failures++
		case c.Error != nil:
			s.Errors++
		case c.Skipped != nil:
			s.Skipped++
		}
	}
}

// Write writes s as junit.xml.
func (s Suites) Write(path string) error {
	data, err := xml.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(data, '\n')...), 0o644)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
