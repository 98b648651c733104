package simlane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/diag"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

func consoleLines(data []byte) int {
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return n
}

// checkPreviousLog: a restarted container's last instance is kept (kubectl logs --previous)
// and shows the cause.
func checkPreviousLog(t *testing.T, art, want string) {
	t.Helper()
	var found []string
	_ = filepath.WalkDir(art, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".previous.log") {
			if data, rerr := os.ReadFile(p); rerr == nil && bytes.Contains(data, []byte(want)) {
				found = append(found, p)
			}
		}
		return err
	})
	if len(found) == 0 {
		t.Errorf("no *.previous.log among the artifacts shows %q: the restarted importer's last instance was not kept", want)
	}
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

// nthObservation is when fault f first showed for pool the n-th time (n from 1) on one and the
// same object (a VM's VMIs keep its name): the earliest n-th record of any object.
func nthObservation(obs []simenv.Observation, f faults.Name, pool string, n int) (time.Time, bool) {
	byObject := map[string][]time.Time{}
	for _, o := range obs {
		if o.Fault == f && (o.Pool == pool || o.Pool == "") {
			byObject[o.Object] = append(byObject[o.Object], o.At)
		}
	}
	var at time.Time
	for _, ats := range byObject {
		sort.Slice(ats, func(i, j int) bool { return ats[i].Before(ats[j]) })
		if n >= 1 && len(ats) >= n && (at.IsZero() || ats[n-1].Before(at)) {
			at = ats[n-1]
		}
	}
	return at, !at.IsZero()
}

// diagnosticsRoundGap separates two rounds of on-failure collectors: a lifecycle run can fail
// in one phase and again in a later one, each failure collected right after its spec.
const diagnosticsRoundGap = 10 * time.Second

// diagnosticsSpan is the wall time of the on-failure collectors over every process's entries in
// manifest.json: for each round (collectors that start within diagnosticsRoundGap of the
// round's end so far), from its first start to its last end, added up.
func diagnosticsSpan(t *testing.T, art string) time.Duration {
	entries, err := diag.ReadManifest(filepath.Join(art, "manifest.json"))
	if err != nil {
		t.Errorf("manifest.json: %v", err)
		return 0
	}
	var collected []diag.Entry
	for _, e := range entries {
		// Streams run all along; the tree of the whole cluster is written at the end of every
		// run, for the summary, not because something failed.
		if strings.HasPrefix(e.Name, "stream ") || e.Status == diag.Declined || (e.Name == "cluster tree" && strings.HasPrefix(e.Scope, "cluster ")) {
			continue
		}
		collected = append(collected, e)
	}
	sort.Slice(collected, func(i, j int) bool { return collected[i].Start.Before(collected[j].Start) })
	var total time.Duration
	var first, last time.Time
	for _, e := range collected {
		end := e.Start.Add(e.Duration.D())
		if !first.IsZero() && e.Start.After(last.Add(diagnosticsRoundGap)) {
			total += last.Sub(first)
			first = time.Time{}
		}
		if first.IsZero() {
			first, last = e.Start, end
		}
		if end.After(last) {
			last = end
		}
	}
	if !first.IsZero() {
		total += last.Sub(first)
	}
	return total
}

// laneCommand is `bin run --lane <laneArg>` from the project root, with env over this
// process's environment: no fault, no keeping or reuse unless env says so.
func laneCommand(root, bin, laneArg string, env ...string) *exec.Cmd {
	cmd := exec.Command(bin, "run", "--lane", laneArg)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "E2E_SIM_FAULT=", "E2E_KEEP=", "E2E_REUSE="), env...)
	return cmd
}

// exitCode is the exit status in a Wait error (0 when there is none).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
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

// shortPoolsLane writes a copy of lanes/sim.yaml, named sim-short-pools, whose pools phase has
// ceiling instead of its own, and returns its path. It fails if sim.yaml has no pools phase.
func shortPoolsLane(t *testing.T, root string, ceiling time.Duration) string {
	t.Helper()
	return laneCopy(t, root, "sim", "sim-short-pools", func(top *yaml.Node) {
		setPoolsCeiling(t, top, ceiling)
	})
}

// filteredLane writes a copy of lanes/<src>.yaml whose kubernetes suite runs with label filter
// filter, and returns its path.
func filteredLane(t *testing.T, root, src, filter string) string {
	t.Helper()
	return laneCopy(t, root, src, src+"-filtered", func(top *yaml.Node) {
		if suites := mapValue(top, "suites"); suites != nil {
			for _, s := range suites.Content {
				if n := mapValue(s, "name"); n != nil && n.Value == "kubernetes" {
					if f := mapValue(s, "labelFilter"); f != nil {
						f.Value = filter
						return
					}
				}
			}
		}
		t.Fatalf("lanes/%s.yaml: no labelFilter of suite kubernetes to set", src)
	})
}

// mhcLane writes a copy of lanes/sim.yaml, named sim-mhc, for the mhc-replacement fault: its
// apps' MachineHealthChecks replace a Machine that has no Node nodeStartupTimeout after it
// (the chart's 10m would replace nothing within a run) whatever the share of unhealthy
// Machines (the chart's 50% never remediates a one-machine pool), and its pools phase has
// ceiling, so a replacement can still join within it; the job cap grows by what the pools
// ceiling does.
func mhcLane(t *testing.T, root string, nodeStartupTimeout, ceiling time.Duration) string {
	t.Helper()
	return laneCopy(t, root, "sim", "sim-mhc", func(top *yaml.Node) {
		growJobCap(t, top, ceiling-setPoolsCeiling(t, top, ceiling))
		sim := mapValue(top, "sim")
		if sim == nil {
			t.Fatal("lanes/sim.yaml: no sim section")
		}
		mhc := &yaml.Node{Kind: yaml.MappingNode}
		for _, kv := range [][2]string{{"maxUnhealthy", "100%"}, {"nodeStartupTimeout", nodeStartupTimeout.String()}} {
			mhc.Content = append(mhc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: kv[0]}, &yaml.Node{Kind: yaml.ScalarNode, Value: kv[1]})
		}
		sim.Content = append(sim.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "machineHealthCheck"}, mhc)
	})
}

// longNamesLane writes a copy of lanes/sim.yaml, named sim-long-names, whose second cluster
// (the one its class-based pools name) has the longest name the lane accepts for them with a
// run id of lane.MaxRunID characters, and returns its path and that name.
func longNamesLane(t *testing.T, root string) (string, string) {
	t.Helper()
	name := ""
	path := laneCopy(t, root, "sim", "sim-long-names", func(top *yaml.Node) {
		pools := mapValue(top, "pools")
		longest := 0
		for _, p := range pools.Content {
			if mapValue(p, "cluster") != nil {
				longest = max(longest, len(mapValue(p, "name").Value))
			}
		}
		if longest == 0 {
			t.Fatal("lanes/sim.yaml: no pool names a cluster of its own")
		}
		// kubernetes-<cluster>-<run id>-<pool>-<5>-<5> within a label value's 63 characters.
		n := 63 - len("kubernetes-") - 1 - lane.MaxRunID - 1 - 12 - longest
		name = "classes-" + strings.Repeat("l", n-len("classes-"))
		for _, p := range pools.Content {
			if c := mapValue(p, "cluster"); c != nil {
				c.Value = name
			}
		}
	})
	return path, name
}

// growJobCap adds by (when positive) to the lane's budget.jobCap.
func growJobCap(t *testing.T, top *yaml.Node, by time.Duration) {
	t.Helper()
	jobCap := mapValue(mapValue(top, "budget"), "jobCap")
	if jobCap == nil {
		t.Fatal("the lane has no budget.jobCap")
	}
	d, err := time.ParseDuration(jobCap.Value)
	if err != nil {
		t.Fatalf("budget.jobCap %q: %v", jobCap.Value, err)
	}
	jobCap.Value = (d + max(by, 0)).String()
}

// setPoolsCeiling sets the pools phase's ceiling and returns the one it had.
func setPoolsCeiling(t *testing.T, top *yaml.Node, ceiling time.Duration) time.Duration {
	t.Helper()
	if phases := mapValue(mapValue(top, "budget"), "phases"); phases != nil {
		for _, ph := range phases.Content {
			if n, c := mapValue(ph, "name"), mapValue(ph, "ceiling"); n != nil && n.Value == "pools" && c != nil {
				old, err := time.ParseDuration(c.Value)
				if err != nil {
					t.Fatalf("pools ceiling %q: %v", c.Value, err)
				}
				c.Value = ceiling.String()
				return old
			}
		}
	}
	t.Fatal("no budget.phases entry named pools with a ceiling")
	return 0
}

// laneCopy writes lanes/<src>.yaml, renamed name and changed by edit, into the test's temp
// folder and returns its path; the copy must pass the lane checks.
func laneCopy(t *testing.T, root, src, name string, edit func(top *yaml.Node)) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "lanes", src+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	top := doc.Content[0]
	n := mapValue(top, "name")
	if n == nil {
		t.Fatalf("lanes/%s.yaml: no name", src)
	}
	n.Value = name
	edit(top)
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := lane.Load(path); err != nil {
		t.Fatalf("the %s copy of lanes/%s.yaml: %v", name, src, err)
	}
	return path
}

// mapValue is the value node of key in mapping node m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
