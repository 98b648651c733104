package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
)

// Result is one run's figures.
type Result struct {
	Scenario Scenario `json:"scenario"`
	Label    string   `json:"label"`
	Lane     string   `json:"lane"`
	// Workers is every worker VM of the lane (the scaled ones and the lane's other pools').
	Workers  int      `json:"workers"`
	Verdict  string   `json:"verdict"`
	ExitCode int      `json:"exitCode"`
	Failures []string `json:"failures,omitempty"`
	// LoadStart and LoadEnd are /proc/loadavg's 1, 5 and 15 minute loads around the run.
	LoadStart string  `json:"loadStart"`
	LoadEnd   string  `json:"loadEnd"`
	Wall      float64 `json:"wallSeconds"`
	// CPU is user and system seconds of bin/e2e and every process under it that was waited for
	// (getrusage RUSAGE_CHILDREN across the run).
	CPU float64 `json:"cpuSeconds"`
	// HarnessCPU is the suite processes' CPU seconds (the harness's own work: its watches, waits,
	// collectors and specs); OrchestratorCPU is bin/e2e's, which also runs Cluster API's
	// controllers and the stand-ins in process, so it is not the harness's alone.
	HarnessCPU      float64 `json:"harnessCpuSeconds"`
	HarnessShare    float64 `json:"harnessCpuShare"`
	OrchestratorCPU float64 `json:"orchestratorCpuSeconds"`
	// PeakTreeMiB is the largest sum of the tree's resident sets among the samples; LargestMiB
	// the largest one process reached, and which.
	PeakTreeMiB float64    `json:"peakTreeRssMiB"`
	LargestMiB  float64    `json:"largestProcessRssMiB"`
	LargestComm string     `json:"largestProcess"`
	Processes   []ProcStat `json:"processes"`
	// Requests are the harness user's requests to the management apiserver per client program;
	// HarnessRequests the suite's, per worker in HarnessPerWorker.
	Requests         []Requests `json:"requests"`
	HarnessRequests  int        `json:"harnessRequests"`
	HarnessPerWorker float64    `json:"harnessRequestsPerWorker"`
	// HarnessPerAddedWorker is what each worker over the 1-worker run's added to the suite's
	// requests: what a watch-driven harness keeps flat, its fixed cost (watches, reads of the
	// app's objects) left out.
	HarnessPerAddedWorker float64 `json:"harnessRequestsPerAddedWorker,omitempty"`
	// Phases are the lane's phases' seconds spent.
	Phases map[string]float64 `json:"phases"`
	// Stages are each join stage's seconds over the scaled pools.
	Stages []StageStat `json:"stages"`
	// Steps are the workers' hand-overs from Machine to nodeRef, each with who spends it
	// (Attribute).
	Steps     []Step `json:"steps"`
	Artifacts string `json:"artifacts"`
}

// StageStat is one join stage's seconds over the scaled pools (per pool: from the pool reaching
// the stage to its last worker passing it).
type StageStat struct {
	Stage  string  `json:"stage"`
	Pools  int     `json:"pools"`
	Median float64 `json:"medianSeconds"`
	Max    float64 `json:"maxSeconds"`
}

// runOne runs the scenario's lane once through bin/e2e in dir (its console log, audit log and
// artifacts) and reads what the run left: its processes, the harness's API requests, the verdict,
// the phases and join stages, the workers' steps.
func runOne(ctx context.Context, e2e, lanes, dir string, s Scenario) (Result, error) {
	r := Result{Scenario: s, Label: s.Label(), Lane: s.Name(), LoadStart: loadavg()}
	l, err := lane.Load(filepath.Join(lanes, s.Name()+".yaml"))
	if err != nil {
		return r, err
	}
	for _, p := range l.Pools {
		r.Workers += p.Replicas
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	r.Artifacts = filepath.Join(dir, "artifacts")
	audit := filepath.Join(dir, "audit.jsonl")
	logf, err := os.Create(filepath.Join(dir, "console.log"))
	if err != nil {
		return r, err
	}
	defer logf.Close()
	cmd := exec.Command(e2e, "run", "--lane", s.Name(), "--lanes-dir", lanes, "--no-build")
	cmd.Env = append(os.Environ(), "E2E_ARTIFACTS="+r.Artifacts, simulated.AuditLogEnv+"="+audit, "TERM=dumb")
	cmd.Stdout, cmd.Stderr = logf, logf
	sampler, err := runSampled(ctx, cmd, &r)
	if err != nil {
		return r, err
	}

	readProcesses(&r, sampler, cmd.Process.Pid)
	readRequests(&r, audit)
	readVerdict(&r)
	if err := readTimings(&r, s); err != nil {
		r.Failures = append(r.Failures, err.Error())
	}
	if r.Steps, err = Attribute(r.Artifacts, s.ScaledPools()); err != nil {
		r.Failures = append(r.Failures, err.Error())
	}
	return r, nil
}

// runSampled starts cmd, samples its process tree until it ends (interrupting it when ctx is
// done), and records in r the wall time, the CPU of everything it ran, the load at its end and its
// exit code. The error is one of starting or waiting for cmd, not its exit code.
func runSampled(ctx context.Context, cmd *exec.Cmd, r *Result) (*Sampler, error) {
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sctx, stopSampling := context.WithCancel(context.Background())
	sampler := NewSampler(cmd.Process.Pid, 250*time.Millisecond)
	sampled := make(chan struct{})
	go func() { defer close(sampled); sampler.Run(sctx) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		// bin/e2e tears the sim down on SIGINT.
		_ = cmd.Process.Signal(os.Interrupt)
		waitErr = <-done
	}
	r.Wall = time.Since(start).Seconds()
	stopSampling()
	<-sampled
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after)
	r.CPU = tv(after.Utime) + tv(after.Stime) - tv(before.Utime) - tv(before.Stime)
	r.LoadEnd = loadavg()
	var exit *exec.ExitError
	if errors.As(waitErr, &exit) {
		r.ExitCode = exit.ExitCode()
	} else if waitErr != nil {
		return nil, waitErr
	}
	return sampler, nil
}

// readProcesses records in r what the sampler saw of the run's processes: the tree's peak memory,
// the largest process, the harness's (the test binaries') and bin/e2e's own CPU, and the
// harness's share of the run's CPU.
func readProcesses(r *Result, sampler *Sampler, e2ePid int) {
	procs, tree := sampler.Result()
	r.PeakTreeMiB = tree
	for _, p := range procs {
		if p.PeakMiB > r.LargestMiB {
			r.LargestMiB, r.LargestComm = p.PeakMiB, p.Comm
		}
		switch {
		case strings.HasSuffix(p.Comm, ".test"):
			r.HarnessCPU += p.CPU
		case p.Pid == e2ePid:
			r.OrchestratorCPU += p.CPU
		}
	}
	r.Processes = ByComm(procs)
	if r.CPU > 0 {
		r.HarnessShare = r.HarnessCPU / r.CPU
	}
}

// readRequests records in r the harness's API requests from the run's audit log, in all and per
// worker; a log it cannot read is a failure of the run's report.
func readRequests(r *Result, audit string) {
	var err error
	if r.Requests, err = ReadAudit(audit, simulated.HarnessUser); err != nil {
		r.Failures = append(r.Failures, err.Error())
	}
	for _, q := range r.Requests {
		if strings.HasSuffix(q.Agent, ".test") {
			r.HarnessRequests += q.Total
		}
	}
	if r.Workers > 0 {
		r.HarnessPerWorker = float64(r.HarnessRequests) / float64(r.Workers)
	}
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func readVerdict(r *Result) {
	b, err := os.ReadFile(filepath.Join(r.Artifacts, "verdict.json"))
	if err != nil {
		r.Verdict = "no verdict.json"
		return
	}
	var v verdict.Verdict
	if err := json.Unmarshal(b, &v); err != nil {
		r.Verdict = "unreadable verdict.json"
		return
	}
	r.Verdict = string(v.Result)
	for _, f := range v.Failures {
		r.Failures = append(r.Failures, fmt.Sprintf("%s %s: %s", f.Class, f.Stage, firstLine(f.Message)))
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func readTimings(r *Result, s Scenario) error {
	b, err := os.ReadFile(filepath.Join(r.Artifacts, "timings.json"))
	if err != nil {
		return err
	}
	var t budget.Timings
	if err := json.Unmarshal(b, &t); err != nil {
		return fmt.Errorf("timings.json: %w", err)
	}
	r.Phases = map[string]float64{}
	for _, p := range t.Phases {
		r.Phases[p.Name] = time.Duration(p.Spent).Seconds()
	}
	scaled := s.ScaledPools()
	by := map[string][]float64{}
	var order []string
	for _, st := range t.Stages {
		if !slices.Contains(scaled, st.Pool) {
			continue
		}
		if _, ok := by[st.Stage]; !ok {
			order = append(order, st.Stage)
		}
		by[st.Stage] = append(by[st.Stage], time.Duration(st.Spent).Seconds())
	}
	for _, name := range order {
		v := by[name]
		sort.Float64s(v)
		r.Stages = append(r.Stages, StageStat{Stage: name, Pools: len(v), Median: median(v), Max: v[len(v)-1]})
	}
	return nil
}
