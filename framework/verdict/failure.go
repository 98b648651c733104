package verdict

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Failure is one failed spec or harness step, as the verdict and the reports see it.
type Failure struct {
	// Spec is the full spec name ("kubernetes pool md0 joins"), or the harness phase.
	Spec string `json:"spec"`
	// Pool is the pool the failure is scoped to; empty when it is not about one pool.
	Pool  string `json:"pool,omitempty"`
	Class Class  `json:"class"`
	// Stage is the join stage (framework/join) or harness phase where it failed.
	Stage   string `json:"stage,omitempty"`
	Message string `json:"message"`
	// Evidence are artifact paths, relative to the artifacts folder, that explain it.
	Evidence []string `json:"evidence,omitempty"`
	// At is when the failure was decided.
	At time.Time `json:"at"`
	// Soft is set by the policy: the lane only warns on this class.
	Soft bool `json:"soft,omitempty"`
}

// WriteFailures writes failures as JSON (a suite's failures.json).
func WriteFailures(path string, failures []Failure) error {
	if failures == nil {
		failures = []Failure{}
	}
	data, err := json.MarshalIndent(failures, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadFailures reads a failures.json.
func ReadFailures(path string) ([]Failure, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Failure
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}
