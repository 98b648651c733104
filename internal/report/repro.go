package report

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// LaneCopy is the lane file's copy in the artifacts folder, lane/<lane>.yaml (a lane file is
// named after its lane): the repro runs it, so a
// lane file changed since the run does not change what is rerun.
func LaneCopy(lane string) string { return "lane/" + lane + ".yaml" }

// Repro is what reruns a lane with the same pins: the commit, the lane file's exact content,
// the run id and the environment that selected faults or a canary.
type Repro struct {
	Lane string `json:"lane"`
	// LaneFile is the lane file's copy, relative to the artifacts folder.
	LaneFile string `json:"laneFile"`
	Commit   string `json:"commit,omitempty"`
	// Dirty says the checkout had changes not in Commit: the repro is not exact.
	Dirty bool   `json:"dirty,omitempty"`
	RunID string `json:"runId,omitempty"`
	// Env are the E2E_* variables the run was given that change what it does
	// (E2E_SIM_FAULT, E2E_FROM_PHASE, ...); never a credential.
	Env map[string]string `json:"env,omitempty"`
	// Command is the one command, to be run from a checkout of the project, with ARTIFACTS set
	// to the folder holding this file.
	Command string `json:"command"`
}

// reproEnv are the variables a repro carries over; E2E_SIM_CANARY is left out on purpose (a
// fresh random canary proves the same thing).
var reproEnv = []string{"E2E_SIM_FAULT", "E2E_FROM_PHASE", "E2E_PLATFORM_SOURCE", "E2E_REUSE", "E2E_KIND_NODE_IMAGE"}

// ReproEnv picks the variables a repro carries over from an environment lookup.
func ReproEnv(lookup func(string) (string, bool)) map[string]string {
	out := map[string]string{}
	for _, k := range reproEnv {
		if v, ok := lookup(k); ok && v != "" {
			out[k] = v
		}
	}
	return out
}

// GitHead is the commit checked out in dir and whether the tree has uncommitted changes.
func GitHead(dir string) (commit string, dirty bool, err error) {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false, fmt.Errorf("git rev-parse HEAD in %s: %w", dir, err)
	}
	st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return "", false, fmt.Errorf("git status in %s: %w", dir, err)
	}
	return strings.TrimSpace(string(out)), len(strings.TrimSpace(string(st))) > 0, nil
}

// WriteRepro copies the lane file into dir (unless it is in dir already, a copy the
// orchestrator made) and writes repro.json and repro.txt.
func WriteRepro(dir, laneFile string, r Repro) (Repro, error) {
	if rel, err := filepath.Rel(dir, laneFile); err == nil && filepath.IsLocal(rel) {
		r.LaneFile = filepath.ToSlash(rel)
	} else {
		data, err := os.ReadFile(laneFile)
		if err != nil {
			return r, fmt.Errorf("repro: lane file: %w", err)
		}
		r.LaneFile = LaneCopy(r.Lane)
		if err := os.MkdirAll(filepath.Join(dir, "lane"), 0o755); err != nil {
			return r, err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(r.LaneFile)), data, 0o644); err != nil {
			return r, err
		}
	}
	r.Command = reproCommand(r)
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(dir, "repro.json"), append(j, '\n'), 0o644); err != nil {
		return r, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Rerun lane %s with the same pins: commit %s, the lane file as it was (%s here), run id %s",
		r.Lane, orUnknown(r.Commit), r.LaneFile, orUnknown(r.RunID))
	if len(r.Env) > 0 {
		fmt.Fprintf(&b, ", %s", envWords(r.Env))
	}
	b.WriteString(".\n# From a checkout of the project, with ARTIFACTS the folder holding this file:\n")
	b.WriteString(r.Command + "\n")
	if r.Dirty {
		b.WriteString("# The run's checkout had uncommitted changes: the commit alone does not hold what ran.\n")
	}
	b.WriteString("# Or: make repro ARTIFACTS=<this folder>\n")
	return r, os.WriteFile(filepath.Join(dir, "repro.txt"), []byte(b.String()), 0o644)
}

func reproCommand(r Repro) string {
	var parts []string
	if r.Commit != "" {
		parts = append(parts, "git checkout --detach "+r.Commit+" &&")
	}
	keys := make([]string, 0, len(r.Env))
	for k := range r.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+shellQuote(r.Env[k]))
	}
	if r.RunID != "" {
		parts = append(parts, "E2E_RUN_ID="+shellQuote(r.RunID))
	}
	parts = append(parts, `make e2e LANE="$ARTIFACTS/`+r.LaneFile+`"`)
	return strings.Join(parts, " ")
}

func envWords(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var w []string
	for _, k := range keys {
		w = append(w, k+"="+env[k])
	}
	return strings.Join(w, ", ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,@/:=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
