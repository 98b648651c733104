package simlane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/diag"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/sim/faults"
	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/framework/verdict/report"
)

// Bounds of the done criterion (issue 5).
const (
	maxTimeToVerdict = 10 * time.Second
	maxDiagnostics   = 60 * time.Second
	maxArtifacts     = 20 << 20
	// runTimeout bounds one whole run of the sim lane (its job cap is 10m).
	runTimeout = 12 * time.Minute
)

// explains is what the evidence of each fault must show: a file among the failure's evidence
// holding the text (any of them), or a console file with the guest's lines.
var explains = map[faults.Name][]string{
	faults.DiskImportRefused: {"401"},
	faults.VMIUnschedulable:  {"Insufficient memory"},
	faults.GuestJoinRejected: {"console"},
	faults.HostnameMismatch:  {"MISMATCH"},
	faults.NodeTainted:       {"NoSchedule"},
	faults.MissingClusterDNS: {"clusterDNS: EMPTY", "clusterDNS: ABSENT"},
}

type outcome struct {
	name          string
	result        verdict.Result
	failures      int
	timeToVerdict time.Duration
	diagnostics   time.Duration
	artifacts     int64
	wall          time.Duration
}

func TestSimLaneUnderEachFault(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole sim lane once per fault, minutes each; run without -short")
	}
	root := projectRoot(t)
	l, err := lane.Load(filepath.Join(root, "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildOrchestrator(t, root)
	runs := []string{"green"}
	for _, f := range faults.Catalogue() {
		if f.Terminal || f.Passes {
			runs = append(runs, string(f.Name))
		}
	}
	if only := os.Getenv("E2E_FAULTS"); only != "" {
		runs = strings.Split(only, ",")
	}
	var table []outcome
	for _, name := range runs {
		t.Run(name, func(t *testing.T) {
			table = append(table, runLane(t, root, bin, l, name))
		})
	}
	t.Log("\nrun                   result      failures  time-to-verdict  diagnostics  artifacts   wall")
	for _, o := range table {
		t.Logf("%-21s %-11s %8d  %15s  %11s  %7.2fMB  %6s", o.name, o.result, o.failures, o.timeToVerdict.Round(10*time.Millisecond),
			o.diagnostics.Round(10*time.Millisecond), float64(o.artifacts)/(1<<20), o.wall.Round(time.Second))
	}
}

func runLane(t *testing.T, root, bin string, l *lane.Lane, name string) outcome {
	out := outcome{name: name}
	var f faults.Fault
	if name != "green" {
		var ok bool
		if f, ok = faults.Lookup(faults.Name(name)); !ok {
			t.Fatalf("E2E_FAULTS: %q is neither green nor a sim fault", name)
		}
	}
	art := filepath.Join(t.TempDir(), "artifacts")
	if keep := os.Getenv("E2E_FAULT_ARTIFACTS"); keep != "" {
		art = filepath.Join(keep, name)
		if err := os.RemoveAll(art); err != nil {
			t.Fatal(err)
		}
	}
	canary := fmt.Sprintf("canary-%d-%s", time.Now().UnixNano(), strings.ReplaceAll(name, "-", ""))
	cmd := exec.Command(bin, "run", "--lane", "sim")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "E2E_ARTIFACTS="+art, "E2E_SIM_CANARY="+canary, "E2E_SIM_FAULT=", "E2E_KEEP=", "E2E_REUSE=")
	if name != "green" {
		cmd.Env = append(cmd.Env, "E2E_SIM_FAULT="+name)
	}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	start := time.Now()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(runTimeout):
		_ = cmd.Process.Kill()
		werr = <-done
		t.Errorf("the run took more than %s", runTimeout)
	}
	out.wall = time.Since(start)
	code := 0
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		code = ee.ExitCode()
	}
	v, err := verdict.ReadVerdict(filepath.Join(art, "verdict.json"))
	if err != nil {
		t.Fatalf("no verdict (exit %d): %v\n%s", code, err, tail(log.String(), 60))
	}
	out.result, out.failures = v.Result, len(v.Failures)
	if v.ExitCode != code {
		t.Errorf("verdict.json says exit %d, the run exited %d", v.ExitCode, code)
	}
	if name == "green" || f.Passes {
		if v.Result != verdict.Pass {
			t.Errorf("%s: result %s, want pass: %s\n%s", name, v.Result, v.Reason, tail(log.String(), 40))
		}
	} else {
		checkFault(t, l, f, v, art, &out)
	}
	if err := diag.Scan(art, canary); err != nil {
		t.Errorf("canary: %v", err)
	}
	out.diagnostics = diagnosticsSpan(t, art)
	if out.diagnostics > maxDiagnostics {
		t.Errorf("the on-failure diagnostics took %s, more than %s", out.diagnostics, maxDiagnostics)
	}
	size, _, err := report.Size(art)
	if err != nil {
		t.Fatal(err)
	}
	out.artifacts = size
	if size > maxArtifacts {
		t.Errorf("the artifacts hold %d bytes, more than %d", size, maxArtifacts)
	}
	if t.Failed() {
		t.Logf("run output:\n%s", tail(log.String(), 80))
	}
	return out
}

// checkFault holds the verdict of a terminal fault to the catalogue, for every targeted pool.
func checkFault(t *testing.T, l *lane.Lane, f faults.Fault, v verdict.Verdict, art string, out *outcome) {
	t.Helper()
	set, err := faults.Parse(string(f.Name))
	if err != nil {
		t.Fatal(err)
	}
	osOf := map[string]string{"talos": "talos", "kairos": "kairos"}
	for _, c := range l.Classes {
		osOf[c.Name] = c.OS
	}
	obs := observations(t, art)
	if v.Result != verdict.Fail || v.ExitCode != verdict.ExitFail {
		t.Errorf("result %s exit %d, want fail 1: %s", v.Result, v.ExitCode, v.Reason)
	}
	for _, p := range l.Pools {
		targeted := set.Active(f.Name, p.Name, osOf[p.Class] == "kairos")
		var mine []verdict.Failure
		for _, x := range v.Failures {
			if x.Pool == p.Name {
				mine = append(mine, x)
			}
		}
		if !targeted {
			if len(mine) > 0 {
				t.Errorf("pool %s is not targeted by %s but failed: %s", p.Name, f.Name, mine[0].Line())
			}
			continue
		}
		if len(mine) == 0 {
			t.Errorf("pool %s: no failure; want %s at %s", p.Name, f.Class, f.Stage)
			continue
		}
		got := mine[0]
		if got.Class != f.Class || got.Stage != string(f.Stage) {
			t.Errorf("pool %s: %s at %s, want %s at %s (%s)", p.Name, got.Class, got.Stage, f.Class, f.Stage, got.Message)
		}
		at, ok := firstObservation(obs, f.Name, p.Name)
		if !ok {
			t.Errorf("pool %s: the sim recorded no observation of %s (faults-observed.jsonl)", p.Name, f.Name)
		} else {
			d := got.At.Sub(at)
			out.timeToVerdict = max(out.timeToVerdict, d)
			t.Logf("pool %s: %s at %s decided %s after the fault became observable", p.Name, got.Class, got.Stage, d.Round(time.Millisecond))
			if d > maxTimeToVerdict {
				t.Errorf("pool %s: verdict %s after the fault became observable, more than %s", p.Name, d, maxTimeToVerdict)
			}
		}
		checkEvidence(t, f, got, art)
	}
}

// checkEvidence: every evidence path exists, and one of them shows the cause.
func checkEvidence(t *testing.T, f faults.Fault, x verdict.Failure, art string) {
	t.Helper()
	if len(x.Evidence) == 0 {
		t.Errorf("pool %s: the failure names no evidence", x.Pool)
		return
	}
	shown := false
	for _, p := range x.Evidence {
		data, err := os.ReadFile(filepath.Join(art, filepath.FromSlash(p)))
		if err != nil {
			if info, serr := os.Stat(filepath.Join(art, p)); serr == nil && info.IsDir() {
				continue
			}
			t.Errorf("pool %s: evidence %s: %v", x.Pool, p, err)
			continue
		}
		for _, want := range explains[f.Name] {
			if want == "console" {
				shown = shown || strings.Contains(p, "/consoles/") && consoleLines(data) > 0
			} else if bytes.Contains(data, []byte(want)) {
				shown = true
			}
		}
	}
	if !shown {
		t.Errorf("pool %s: no evidence file shows %v; evidence: %v", x.Pool, explains[f.Name], x.Evidence)
	}
}

func consoleLines(data []byte) int {
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return n
}

// observations reads the sim's record of when each fault became observable, copied into the
// artifacts by the sim substrate.
func observations(t *testing.T, art string) []simenv.Observation {
	t.Helper()
	var out []simenv.Observation
	found := false
	_ = filepath.WalkDir(art, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "faults-observed.jsonl" {
			return err
		}
		found = true
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var o simenv.Observation
			if json.Unmarshal(sc.Bytes(), &o) == nil {
				out = append(out, o)
			}
		}
		return nil
	})
	if !found {
		t.Errorf("no faults-observed.jsonl in the artifacts: the sim substrate copies its observations there")
	}
	return out
}

func firstObservation(obs []simenv.Observation, f faults.Name, pool string) (time.Time, bool) {
	var at time.Time
	for _, o := range obs {
		if o.Fault == f && (o.Pool == pool || o.Pool == "") && (at.IsZero() || o.At.Before(at)) {
			at = o.At
		}
	}
	return at, !at.IsZero()
}

// diagnosticsSpan is the wall time of the on-failure collectors: from the first one's start
// to the last one's end, over every process's entries in manifest.json.
func diagnosticsSpan(t *testing.T, art string) time.Duration {
	entries, err := diag.ReadManifest(filepath.Join(art, "manifest.json"))
	if err != nil {
		t.Errorf("manifest.json: %v", err)
		return 0
	}
	var first, last time.Time
	for _, e := range entries {
		if strings.HasPrefix(e.Name, "stream ") || e.Status == diag.Declined {
			continue
		}
		end := e.Start.Add(e.Duration.D())
		if first.IsZero() || e.Start.Before(first) {
			first = e.Start
		}
		if end.After(last) {
			last = end
		}
	}
	return last.Sub(first)
}

// buildOrchestrator builds cmd/e2e into the test's temp folder: the binary the runs exercise.
func buildOrchestrator(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "e2e")
	build := exec.Command("go", "build", "-o", bin, "./cmd/e2e")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the orchestrator (go build ./cmd/e2e): %v\n%s", err, out)
	}
	return bin
}

func projectRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
