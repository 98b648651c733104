package budget

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// Outcome is how a phase ended.
type Outcome string

const (
	OutcomeOK       Outcome = "ok"
	OutcomeFailed   Outcome = "failed"
	OutcomeDeadline Outcome = "deadline"
	OutcomeDeclined Outcome = "declined"
	// OutcomeSkipped: the run started later in the plan (E2E_FROM_PHASE) and left the phase out.
	OutcomeSkipped Outcome = "skipped"
)

// Seconds is a duration written as seconds in JSON.
type Seconds time.Duration

// MarshalJSON writes seconds with millisecond precision.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", time.Duration(s).Seconds())), nil
}

// UnmarshalJSON reads seconds.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*s = Seconds(time.Duration(f * float64(time.Second)))
	return nil
}

// D is the value as a time.Duration.
func (s Seconds) D() time.Duration { return time.Duration(s) }

// PhaseTiming is one phase: what it was given and what it spent.
type PhaseTiming struct {
	Name string `json:"name"`
	// Cluster is the conformance cluster whose own phase it was (lane.Phase.Cluster), "" for
	// a shared one.
	Cluster  string        `json:"cluster,omitempty"`
	Ceiling  time.Duration `json:"-"`
	Planned  Seconds       `json:"plannedSeconds"`
	Spent    Seconds       `json:"spentSeconds"`
	Start    time.Time     `json:"start"`
	End      time.Time     `json:"end"`
	Deadline time.Time     `json:"deadline,omitzero"`
	Outcome  Outcome       `json:"outcome"`
	Error    string        `json:"error,omitempty"`
	// Note says why a phase was skipped, or what a phase that ran wants the summary to show.
	Note string `json:"note,omitempty"`
}

// Label names the phase for people: its name, and the cluster whose own phase it was.
func (p PhaseTiming) Label() string { return lane.Phase{Name: p.Name, Cluster: p.Cluster}.Label() }

// StageTiming is the time a pool took to reach one join stage from the one before.
type StageTiming struct {
	Pool  string    `json:"pool"`
	Stage string    `json:"stage"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Spent Seconds   `json:"spentSeconds"`
}

// Declined is something the run did not start for lack of time.
type Declined struct {
	What   string    `json:"what"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Mark is something that happened under the run at one moment, neither a phase nor a stage: a
// platform component restarting under the pools, going unavailable, coming back.
type Mark struct {
	At time.Time `json:"at"`
	// Subject is what it happened to ("platform virt-controller"), What what happened
	// ("restarted"), Detail the evidence ("signal 9, exit 137: <its last log line>").
	Subject string `json:"subject"`
	What    string `json:"what"`
	Detail  string `json:"detail,omitempty"`
}

// Timings is timings.json.
type Timings struct {
	Lane         string        `json:"lane"`
	JobStart     time.Time     `json:"jobStart"`
	RootDeadline time.Time     `json:"rootDeadline"`
	Phases       []PhaseTiming `json:"phases"`
	Stages       []StageTiming `json:"stages"`
	Declined     []Declined    `json:"declined"`
	Marks        []Mark        `json:"marks,omitempty"`
}

// Timings is a snapshot of everything the clock recorded.
func (c *Clock) Timings() Timings {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Timings{
		Lane:         c.laneName,
		JobStart:     c.jobStart,
		RootDeadline: c.root,
		Phases:       append([]PhaseTiming{}, c.phases...),
		Stages:       append([]StageTiming{}, c.stages...),
		Declined:     append([]Declined{}, c.declined...),
		Marks:        append([]Mark(nil), c.marks...),
	}
}

// Merge adds another process's timings (a suite's) to t, keeping everything in time order.
func (t Timings) Merge(o Timings) Timings {
	t.Phases = append(t.Phases, o.Phases...)
	t.Stages = append(t.Stages, o.Stages...)
	t.Declined = append(t.Declined, o.Declined...)
	t.Marks = append(t.Marks, o.Marks...)
	sort.SliceStable(t.Marks, func(i, j int) bool { return t.Marks[i].At.Before(t.Marks[j].At) })
	sort.SliceStable(t.Phases, func(i, j int) bool { return t.Phases[i].Start.Before(t.Phases[j].Start) })
	sort.SliceStable(t.Stages, func(i, j int) bool { return t.Stages[i].End.Before(t.Stages[j].End) })
	sort.SliceStable(t.Declined, func(i, j int) bool { return t.Declined[i].At.Before(t.Declined[j].At) })
	return t
}

// Write writes t as indented JSON to path.
func (t Timings) Write(path string) error {
	if t.Phases == nil {
		t.Phases = []PhaseTiming{}
	}
	if t.Stages == nil {
		t.Stages = []StageTiming{}
	}
	if t.Declined == nil {
		t.Declined = []Declined{}
	}
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadTimings reads a timings file.
func ReadTimings(path string) (Timings, error) {
	var t Timings
	data, err := os.ReadFile(path)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return t, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}
