package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// RunInfo is run.json: what a repro needs besides the lane file, and who ran it where.
type RunInfo struct {
	Lane      string    `json:"lane"`
	RunID     string    `json:"runId"`
	Substrate string    `json:"substrate"`
	Started   time.Time `json:"started"`
	JobStart  time.Time `json:"jobStart"`
	Commit    string    `json:"commit,omitempty"`
	Dirty     bool      `json:"dirty,omitempty"`
	// Faults is E2E_SIM_FAULT as given.
	Faults string `json:"faults,omitempty"`
	Runner Runner `json:"runner"`
}

// Runner is the machine identity: red runs are compared knowing where they ran.
type Runner struct {
	Hostname  string `json:"hostname"`
	OS        string `json:"os"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"goVersion"`
}

func writeRunInfo(r *run) error {
	info := RunInfo{
		Lane: r.lane.Name, RunID: r.opts.RunID, Substrate: string(r.lane.Substrate),
		Started: r.started.UTC(), JobStart: r.clock.JobStart().UTC(),
		Faults: os.Getenv("E2E_SIM_FAULT"),
		Runner: runner(),
	}
	if out, err := gitOutput(r.root, "rev-parse", "HEAD"); err == nil {
		info.Commit = out
	}
	if out, err := gitOutput(r.root, "status", "--porcelain", "--untracked-files=no"); err == nil {
		info.Dirty = out != ""
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.artifacts, "run.json"), append(data, '\n'), 0o644)
}

func readRunInfo(dir string) (RunInfo, error) {
	var info RunInfo
	data, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(data, &info)
}

func runner() Runner {
	host, _ := os.Hostname()
	r := Runner{Hostname: host, OS: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		r.Kernel = strings.TrimSpace(string(data))
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				r.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return r
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}
