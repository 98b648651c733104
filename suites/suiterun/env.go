package suiterun

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The environment variables of docs/architecture.md ("Orchestrator → suite").
const (
	EnvLaneFile       = "E2E_LANE_FILE"
	EnvKubeconfig     = "E2E_KUBECONFIG"
	EnvArtifacts      = "E2E_ARTIFACTS"
	EnvSuiteArtifacts = "E2E_SUITE_ARTIFACTS"
	EnvJobStart       = "E2E_JOB_START"
	EnvRunID          = "E2E_RUN_ID"
	// EnvProgress (progress.EnvFD) is the file descriptor the suite's progress events go to;
	// unset, its progress lines go to its output.
	EnvProgress = "E2E_PROGRESS_FD"
	// EnvKeep is E2E_KEEP as the orchestrator checked it: 1, on-failure, or empty.
	EnvKeep = "E2E_KEEP"
	// EnvWork is the suite's private folder outside the artifacts (a kept tenant's kubeconfig).
	EnvWork = "E2E_SUITE_WORK"
)

// Keep values (EnvKeep).
const (
	KeepAlways    = "1"
	KeepOnFailure = "on-failure"
)

// Env is the orchestrator's environment of one suite process.
type Env struct {
	LaneFile       string
	Kubeconfig     string
	Artifacts      string
	SuiteArtifacts string
	JobStart       time.Time
	RunID          string
	// Progress is EnvProgress, optional.
	Progress string
	// Keep is EnvKeep and Work EnvWork, both optional.
	Keep, Work string
}

// FromEnviron reads the environment through getenv (os.Getenv in a suite). Every missing or
// malformed variable is named in one error, with how the suite is meant to be run.
func FromEnviron(getenv func(string) string) (Env, error) {
	e := Env{
		LaneFile: getenv(EnvLaneFile), Kubeconfig: getenv(EnvKubeconfig), Artifacts: getenv(EnvArtifacts),
		SuiteArtifacts: getenv(EnvSuiteArtifacts), RunID: getenv(EnvRunID), Progress: getenv(EnvProgress),
		Keep: getenv(EnvKeep), Work: getenv(EnvWork),
	}
	var bad []string
	for name, v := range map[string]string{EnvLaneFile: e.LaneFile, EnvKubeconfig: e.Kubeconfig, EnvArtifacts: e.Artifacts,
		EnvSuiteArtifacts: e.SuiteArtifacts, EnvRunID: e.RunID} {
		if v == "" {
			bad = append(bad, name+" is not set")
		}
	}
	if s := getenv(EnvJobStart); s == "" {
		bad = append(bad, EnvJobStart+" is not set")
	} else if t, err := time.Parse(time.RFC3339Nano, s); err != nil {
		bad = append(bad, fmt.Sprintf("%s=%q is not an RFC 3339 time", EnvJobStart, s))
	} else {
		e.JobStart = t
	}
	switch e.Keep {
	case "", "0":
		e.Keep = ""
	case KeepAlways, KeepOnFailure:
	default:
		bad = append(bad, fmt.Sprintf("%s=%q is not 1, on-failure or 0", EnvKeep, e.Keep))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return e, fmt.Errorf("suite environment: %s; suites run under the orchestrator (make e2e, or bin/e2e run --lane <lane>)",
			strings.Join(bad, "; "))
	}
	return e, nil
}

// Present reports whether the orchestrator started this process (E2E_LANE_FILE is set).
func Present(getenv func(string) string) bool { return getenv(EnvLaneFile) != "" }

// Path is a file of the suite's own artifacts folder, created if needed.
func (e Env) Path(name string) (string, error) {
	if err := os.MkdirAll(e.SuiteArtifacts, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(e.SuiteArtifacts, name), nil
}
