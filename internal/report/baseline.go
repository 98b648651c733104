package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/internal/diag"
)

// Baseline is what a green run keeps so a red run of the same lane can be compared with it
// mechanically: how long each pool took to each join stage, each phase, and each console.
type Baseline struct {
	Lane     string        `json:"lane"`
	RunID    string        `json:"runId,omitempty"`
	Commit   string        `json:"commit,omitempty"`
	At       time.Time     `json:"at"`
	Stages   []StageTime   `json:"stages"`
	Phases   []PhaseTime   `json:"phases"`
	Consoles []ConsoleTime `json:"consoles"`
}

// StageTime is how long a pool took to reach a stage from the one before.
type StageTime struct {
	Pool    string  `json:"pool"`
	Stage   string  `json:"stage"`
	Seconds float64 `json:"seconds"`
}

// PhaseTime is how long a phase took.
type PhaseTime struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// ConsoleTime is one console's clock: from its launcher's start to its first line, and from
// its first line to its last.
type ConsoleTime struct {
	Pool      string  `json:"pool"`
	VMI       string  `json:"vmi"`
	FirstLine float64 `json:"firstLineSeconds"`
	Span      float64 `json:"spanSeconds"`
	Lines     int     `json:"lines"`
}

// BaselineFrom takes a run's timings and console records.
func BaselineFrom(lane, runID, commit string, at time.Time, t budget.Timings, consoles []diag.ConsoleRecord) Baseline {
	b := Baseline{Lane: lane, RunID: runID, Commit: commit, At: at, Stages: []StageTime{}, Phases: []PhaseTime{}, Consoles: []ConsoleTime{}}
	for _, s := range t.Stages {
		b.Stages = append(b.Stages, StageTime{Pool: s.Pool, Stage: s.Stage, Seconds: s.Spent.D().Seconds()})
	}
	for _, p := range t.Phases {
		if p.Outcome == budget.OutcomeOK {
			b.Phases = append(b.Phases, PhaseTime{Name: p.Label(), Seconds: p.Spent.D().Seconds()})
		}
	}
	for _, c := range consoles {
		ct := ConsoleTime{Pool: c.Pool, VMI: c.VMI, Lines: c.Lines}
		if !c.FirstLine.IsZero() && !c.LauncherStart.IsZero() {
			ct.FirstLine = c.FirstLine.Sub(c.LauncherStart).Seconds()
		}
		if !c.LastLine.IsZero() {
			ct.Span = c.LastLine.Sub(c.FirstLine).Seconds()
		}
		b.Consoles = append(b.Consoles, ct)
	}
	sort.Slice(b.Consoles, func(i, j int) bool { return b.Consoles[i].VMI < b.Consoles[j].VMI })
	return b
}

// Write writes the baseline as JSON.
func (b Baseline) Write(path string) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadBaseline reads a baseline.json.
func ReadBaseline(path string) (Baseline, error) {
	var b Baseline
	data, err := os.ReadFile(path)
	if err != nil {
		return b, err
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("baseline %s: %w", path, err)
	}
	return b, nil
}

// ReadConsoles reads every pools/*/consoles.json under an artifacts folder.
func ReadConsoles(dir string) ([]diag.ConsoleRecord, error) {
	files, err := filepath.Glob(filepath.Join(dir, "pools", "*", "consoles.json"))
	if err != nil {
		return nil, err
	}
	var out []diag.ConsoleRecord
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var recs []diag.ConsoleRecord
		if err := json.Unmarshal(data, &recs); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

// StageDelta compares one stage of one pool with the baseline.
type StageDelta struct {
	Pool, Stage       string
	Baseline, Current float64
	// Reached is false when this run never got past the stage.
	Reached bool
	// Slower flags a stage that took more than twice its baseline and a second more.
	Slower bool
}

// Compare lines up this run's stages with the baseline's, in the baseline's order.
func Compare(b Baseline, t budget.Timings) []StageDelta {
	cur := map[string]float64{}
	for _, s := range t.Stages {
		cur[s.Pool+"/"+s.Stage] = s.Spent.D().Seconds()
	}
	var out []StageDelta
	for _, s := range b.Stages {
		d := StageDelta{Pool: s.Pool, Stage: s.Stage, Baseline: s.Seconds}
		d.Current, d.Reached = cur[s.Pool+"/"+s.Stage]
		d.Slower = d.Reached && d.Current > 2*d.Baseline && d.Current-d.Baseline > 1
		out = append(out, d)
	}
	return out
}
