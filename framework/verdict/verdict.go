package verdict

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Result is a run's outcome.
type Result string

const (
	Pass Result = "pass"
	// Fail: at least one failure is hard (or the run could not judge: configuration, preflight).
	Fail Result = "fail"
	// SoftFail: every failure is of a class the lane's policy marks soft.
	SoftFail Result = "soft-fail"
	// Interrupted: the run was stopped (SIGINT, SIGTERM) before it could judge.
	Interrupted Result = "interrupted"
)

// Exit codes of a run, documented in docs/artifacts.md ("Exit codes").
const (
	ExitPass        = 0
	ExitFail        = 1
	ExitConfig      = 2
	ExitSoft        = 3
	ExitInterrupted = 130
)

// neverSoft are classes that mean the run could not judge the product; no policy softens them.
var neverSoft = map[Class]bool{Configuration: true, Preflight: true, Harness: true}

// Policy is a lane's soft/hard decision per class (lane.Policy.Soft, parsed).
type Policy struct {
	Soft []Class
}

// NewPolicy parses a lane's soft classes; unknown classes and classes that can never be soft
// are refused, naming them.
func NewPolicy(soft []string) (Policy, error) {
	var p Policy
	for i, s := range soft {
		c, err := ParseClass(s)
		if err != nil {
			return Policy{}, fmt.Errorf("policy.soft[%d]: %w", i, err)
		}
		if neverSoft[c] {
			return Policy{}, fmt.Errorf("policy.soft[%d]: %q can never be soft: it means the run could not judge the product", i, s)
		}
		p.Soft = append(p.Soft, c)
	}
	return p, nil
}

// IsSoft reports whether the policy only warns on class c.
func (p Policy) IsSoft(c Class) bool {
	if neverSoft[c] {
		return false
	}
	for _, s := range p.Soft {
		if s == c {
			return true
		}
	}
	return false
}

// Counts summarise the failures.
type Counts struct {
	Failures int `json:"failures"`
	Hard     int `json:"hard"`
	Soft     int `json:"soft"`
	// Skipped counts the checks specs skipped (Verdict.Skipped); they fail nothing.
	Skipped int `json:"skipped,omitempty"`
	// ByClass counts failures per class.
	ByClass map[Class]int `json:"byClass,omitempty"`
}

// Verdict is verdict.json.
type Verdict struct {
	Lane   string `json:"lane"`
	Result Result `json:"result"`
	// ExitCode is what the run exits with.
	ExitCode int       `json:"exitCode"`
	RunID    string    `json:"runId,omitempty"`
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end,omitzero"`
	// Reason is one line for a person: the first hard failure, or why the run was interrupted.
	Reason   string    `json:"reason,omitempty"`
	Counts   Counts    `json:"counts"`
	Failures []Failure `json:"failures"`
	// Skipped are the checks inside specs that could not be judged, each with its reason.
	Skipped []Skip `json:"skipped,omitempty"`
	// Clusters are the lane's conformance clusters, each with its release and the verdict of its
	// own pools.
	Clusters []Cluster `json:"clusters,omitempty"`
	// SoftClasses are the classes the lane's policy softens, for the reader's benefit.
	SoftClasses []Class `json:"softClasses,omitempty"`
}

// Input is what Decide judges.
type Input struct {
	Lane   string
	RunID  string
	Policy Policy
	// Failures of the harness and every suite.
	Failures []Failure
	// Skipped are the checks the suites' specs skipped (suiterun.SkipCheck).
	Skipped []Skip
	// Interrupted is set when the run was stopped by a signal; Signal names it.
	Interrupted bool
	Signal      string
	Start, End  time.Time
	// Clusters are the lane's conformance clusters with their pools (Result and Failures are
	// Decide's to fill).
	Clusters []Cluster
}

// Decide applies the policy: it marks each failure soft or hard, orders them (hard first, then
// by time) and sets the result and exit code.
func Decide(in Input) Verdict {
	v := Verdict{Lane: in.Lane, RunID: in.RunID, Start: in.Start, End: in.End, SoftClasses: in.Policy.Soft,
		Counts: Counts{ByClass: map[Class]int{}}}
	fs := make([]Failure, len(in.Failures))
	copy(fs, in.Failures)
	config := false
	for i := range fs {
		fs[i].Soft = in.Policy.IsSoft(fs[i].Class)
		if fs[i].Evidence == nil {
			fs[i].Evidence = []string{}
		}
		v.Counts.ByClass[fs[i].Class]++
		if fs[i].Soft {
			v.Counts.Soft++
		} else {
			v.Counts.Hard++
		}
		if fs[i].Class == Configuration || fs[i].Class == Preflight {
			config = true
		}
	}
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].Soft != fs[j].Soft {
			return !fs[i].Soft
		}
		return fs[i].At.Before(fs[j].At)
	})
	v.Failures, v.Counts.Failures = fs, len(fs)
	v.Skipped, v.Counts.Skipped = append([]Skip(nil), in.Skipped...), len(in.Skipped)
	v.Clusters = judgeClusters(in.Clusters, fs, in.Interrupted)
	switch {
	case in.Interrupted:
		v.Result, v.ExitCode = Interrupted, ExitInterrupted
		v.Reason = "interrupted"
		if in.Signal != "" {
			v.Reason += " by " + in.Signal
		}
		v.Reason += " before the run could judge"
		if len(fs) > 0 {
			v.Reason += fmt.Sprintf(" (%d failure(s) seen before it)", len(fs))
		}
	case config:
		v.Result, v.ExitCode = Fail, ExitConfig
		v.Reason = fs[0].Line()
	case v.Counts.Hard > 0:
		v.Result, v.ExitCode = Fail, ExitFail
		v.Reason = fs[0].Line()
	case v.Counts.Soft > 0:
		v.Result, v.ExitCode = SoftFail, ExitSoft
		v.Reason = "soft only: " + fs[0].Line()
	default:
		v.Result, v.ExitCode = Pass, ExitPass
	}
	if len(v.Counts.ByClass) == 0 {
		v.Counts.ByClass = nil
	}
	return v
}

// Line is the failure in one line: where (pool or spec), class, stage and message, each said
// once. A message that already opens with its pool, class or stage (a join's StageError, a
// preflight error) is not told them again, and a stage named like its class is not a location.
func (f Failure) Line() string {
	head := f.Spec
	if f.Pool != "" {
		head = "pool " + f.Pool
	}
	msg := strings.TrimPrefix(f.Message, head+": ")
	if head == string(f.Class) || head == f.Stage || head == "harness "+f.Stage {
		head = ""
	}
	label := Label(f.Class, f.Stage)
	switch {
	case opensWith(msg, string(f.Class)):
		label = ""
	case f.Stage != "" && (opensWith(msg, f.Stage) || strings.Contains(msg, "at "+f.Stage+" ")):
		label = string(f.Class)
	}
	var parts []string
	for _, p := range []string{head, label, msg} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ": ")
}

// Label is a class at a stage ("deadline at disk-import"), or the class alone when there is
// no stage or the stage has the class's name ("disk-import", never "disk-import at disk-import").
func Label(c Class, stage string) string {
	if stage == "" || stage == string(c) {
		return string(c)
	}
	return string(c) + " at " + stage
}

// opensWith reports whether s starts with the word w (followed by its end, a colon or a space).
func opensWith(s, w string) bool {
	if w == "" || !strings.HasPrefix(s, w) {
		return false
	}
	rest := s[len(w):]
	return rest == "" || rest[0] == ':' || rest[0] == ' '
}

// Write writes v as verdict.json.
func (v Verdict) Write(path string) error {
	if v.Failures == nil {
		v.Failures = []Failure{}
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadVerdict reads a verdict.json.
func ReadVerdict(path string) (Verdict, error) {
	var v Verdict
	data, err := os.ReadFile(path)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
