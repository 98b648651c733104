package workflows

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

type wfStep struct {
	Name string            `json:"name"`
	ID   string            `json:"id"`
	If   string            `json:"if"`
	Uses string            `json:"uses"`
	Run  string            `json:"run"`
	With map[string]any    `json:"with"`
	Env  map[string]string `json:"env"`
}

type wfJob struct {
	If             string `json:"if"`
	RunsOn         string `json:"runs-on"`
	TimeoutMinutes string `json:"timeout-minutes"`
	Concurrency    struct {
		Group            string `json:"group"`
		CancelInProgress string `json:"cancel-in-progress"`
	} `json:"concurrency"`
	Strategy struct {
		Matrix struct {
			Lane string `json:"lane"`
		} `json:"matrix"`
	} `json:"strategy"`
	Steps []wfStep          `json:"steps"`
	Env   map[string]string `json:"env"`
}

type wfInput struct {
	Type     string   `json:"type"`
	Options  []string `json:"options"`
	Required bool     `json:"required"`
	Default  any      `json:"default"`
}

type wfFile struct {
	On struct {
		PullRequest      *struct{} `json:"pull_request"`
		WorkflowDispatch struct {
			Inputs map[string]wfInput `json:"inputs"`
		} `json:"workflow_dispatch"`
		WorkflowCall struct {
			Inputs map[string]wfInput `json:"inputs"`
		} `json:"workflow_call"`
	} `json:"on"`
	Jobs map[string]wfJob `json:"jobs"`
}

func shippedWorkflows(t *testing.T) ([]*lane.Lane, map[string]wfFile, map[string][]byte) {
	t.Helper()
	lanes, err := lane.LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Workflows(lanes)
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string]wfFile{}
	for path, data := range want {
		// YAML 1.2 (yaml.v3), as GitHub reads it: "on" is a key, not a boolean.
		var doc any
		if err := yamlv3.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s is not valid YAML: %v", path, err)
		}
		js, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var f wfFile
		if err := json.Unmarshal(js, &f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		parsed[path] = f
	}
	return lanes, parsed, want
}

// The reusable workflow is committed exactly as the lanes generate it.
func TestCommittedReusableWorkflowMatchesTheLanes(t *testing.T) {
	_, _, want := shippedWorkflows(t)
	have, err := os.ReadFile(filepath.Join("..", "..", ReusableWorkflowPath))
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != string(want[ReusableWorkflowPath]) {
		t.Fatalf("%s drifted from lanes/*.yaml; run `make workflows`:\n%s", ReusableWorkflowPath, lane.Diff(string(have), string(want[ReusableWorkflowPath])))
	}
}

// In both workflows each lane's timeout-minutes is its job cap and its runner its
// runner.runsOn.
func TestWorkflowsTakeEachLanesCapAndRunner(t *testing.T) {
	lanes, wfs, _ := shippedWorkflows(t)
	for path, key := range map[string]string{WorkflowPath: "matrix.lane", ReusableWorkflowPath: "inputs.lane"} {
		job := wfs[path].Jobs["e2e"]
		var caps map[string]int
		if err := json.Unmarshal([]byte(between(t, job.TimeoutMinutes, "fromJSON('", "')["+key+"]")), &caps); err != nil {
			t.Fatalf("%s: timeout-minutes %q: %v", path, job.TimeoutMinutes, err)
		}
		var runners map[string][]string
		if err := json.Unmarshal([]byte(between(t, job.RunsOn, "|| fromJSON('", "')["+key+"]")), &runners); err != nil {
			t.Fatalf("%s: runs-on %q: %v", path, job.RunsOn, err)
		}
		n := 0
		for _, l := range lanes {
			if l.Substrate != lane.SubstrateKind {
				continue
			}
			n++
			if caps[l.Name] != l.Budget.JobCap.Minutes() || strings.Join(runners[l.Name], ",") != strings.Join(l.Runner.RunsOn, ",") {
				t.Errorf("%s: lane %s: timeout %d runner %v, want %d %v", path, l.Name, caps[l.Name], runners[l.Name], l.Budget.JobCap.Minutes(), l.Runner.RunsOn)
			}
		}
		if path == ReusableWorkflowPath {
			// The old lane names a caller may pass (lane.Aliases) run their lane, on its runner.
			for old, a := range lane.Aliases {
				n++
				if caps[old] != caps[a.Lane] || strings.Join(runners[old], ",") != strings.Join(runners[a.Lane], ",") {
					t.Errorf("%s: old name %s: timeout %d runner %v, want lane %s's", path, old, caps[old], runners[old], a.Lane)
				}
			}
		}
		if len(caps) != n || len(runners) != n {
			t.Errorf("%s: %d timeouts, %d runners, %d kind lanes", path, len(caps), len(runners), n)
		}
	}
}

// A pull request or a push runs the kind lanes that are not runner.nightly; the nightly
// schedule and a dispatch of all run every kind lane; a dispatch of one lane runs it alone.
func TestWorkflowMatrixKeepsNightlyLanesOffPullRequests(t *testing.T) {
	lanes, wfs, _ := shippedWorkflows(t)
	expr := wfs[WorkflowPath].Jobs["e2e"].Strategy.Matrix.Lane
	if !strings.Contains(expr, `inputs.lane && inputs.lane != 'all' && format('["{0}"]', inputs.lane) ||`) {
		t.Errorf("matrix %q does not run the one lane a dispatch names", expr)
	}
	var nightly, all, every, wantNightly, wantAll, wantEvery []string
	sched := between(t, expr, "github.event_name == 'schedule' && '", "'")
	if err := json.Unmarshal([]byte(sched), &nightly); err != nil {
		t.Fatalf("matrix %q: the scheduled lanes: %v", expr, err)
	}
	dispatched := between(t, expr, "github.event_name == 'workflow_dispatch' && '", "'")
	if err := json.Unmarshal([]byte(dispatched), &all); err != nil {
		t.Fatalf("matrix %q: the dispatched lanes: %v", expr, err)
	}
	if err := json.Unmarshal([]byte(between(t, expr, dispatched+"' || '", "'")), &every); err != nil {
		t.Fatalf("matrix %q: the lanes of every change: %v", expr, err)
	}
	// The nightly schedule runs one lane per management setup: its nightly lane, which runs
	// the specs of its lane of every change on the same install.
	nightlySetups := map[string]bool{}
	for _, l := range lanes {
		if l.Substrate == lane.SubstrateKind && l.Runner.Nightly {
			nightlySetups[managementSetup(l)] = true
		}
	}
	for _, l := range lanes {
		if l.Substrate != lane.SubstrateKind {
			continue
		}
		wantAll = append(wantAll, l.Name)
		if l.Runner.Nightly || !nightlySetups[managementSetup(l)] {
			wantNightly = append(wantNightly, l.Name)
		}
		if !l.Runner.Nightly {
			wantEvery = append(wantEvery, l.Name)
		}
	}
	if len(nightlySetups) == 0 {
		t.Error("no shipped kind lane is runner.nightly (kubernetes-lifecycle is)")
	}
	for _, s := range [][]string{nightly, all, every, wantNightly, wantAll, wantEvery} {
		sort.Strings(s)
	}
	if strings.Join(nightly, ",") != strings.Join(wantNightly, ",") || strings.Join(all, ",") != strings.Join(wantAll, ",") ||
		strings.Join(every, ",") != strings.Join(wantEvery, ",") {
		t.Errorf("matrix: scheduled %v, dispatched %v, every change %v; want %v, %v and %v", nightly, all, every, wantNightly, wantAll, wantEvery)
	}
	if strings.Join(nightly, ",") != "kubernetes-lifecycle" {
		t.Errorf("the nightly schedule runs %v; want kubernetes-lifecycle alone (it runs the kubernetes lane's clusters too, on one install)", nightly)
	}
}

// A pull request from a fork never gets a job on these runners, and runs are grouped per ref
// and lane; the e2e workflow's dispatch takes the lane and the platform source, the reusable
// one takes the lane, the platform source and the harness ref.
func TestWorkflowGuardsConcurrencyAndInputs(t *testing.T) {
	lanes, wfs, _ := shippedWorkflows(t)
	for path, c := range map[string][2]string{WorkflowPath: {"${{ github.ref }}", "matrix.lane"}, ReusableWorkflowPath: {"${{ inputs.platform-run-id || github.ref }}", "inputs.lane"}} {
		job := wfs[path].Jobs["e2e"]
		if job.If != "github.event_name != 'pull_request' || github.event.pull_request.head.repo.full_name == github.repository" {
			t.Errorf("%s: job condition %q lets fork pull requests in", path, job.If)
		}
		if !strings.Contains(job.Concurrency.Group, c[0]) || !strings.Contains(job.Concurrency.Group, "${{ "+c[1]+" }}") {
			t.Errorf("%s: concurrency group %q is not per ref (or triggering run) and lane", path, job.Concurrency.Group)
		}
	}
	d := wfs[WorkflowPath].On.WorkflowDispatch.Inputs
	var kind []string
	for _, l := range lanes {
		if l.Substrate == lane.SubstrateKind {
			kind = append(kind, l.Name)
		}
	}
	sort.Strings(kind)
	if d["lane"].Type != "choice" || strings.Join(d["lane"].Options, ",") != "all,"+strings.Join(kind, ",") {
		t.Errorf("dispatch input lane: %+v", d["lane"])
	}
	if _, ok := d["platform-source"]; !ok {
		t.Error("no dispatch input platform-source")
	}
	c := wfs[ReusableWorkflowPath].On.WorkflowCall.Inputs
	for _, name := range []string{"lane", "platform-source", "harness-ref"} {
		if c[name].Type != "string" {
			t.Errorf("workflow_call input %s: %+v", name, c[name])
		}
	}
	if !c["lane"].Required || !c["platform-source"].Required || c["harness-ref"].Default != "main" {
		t.Errorf("workflow_call inputs: %+v", c)
	}
}

// On a GitHub-hosted runner /dev/kvm is opened to the runner user, and on every Linux runner the
// inotify limits are raised to the Cozystack generic install guide's where the job may, before
// anything runs the harness.
func TestHostedRunnerStepsComeBeforeThePreflight(t *testing.T) {
	_, wfs, _ := shippedWorkflows(t)
	for path, wf := range wfs {
		var kvm, sysctl, harness = -1, -1, -1
		for i, s := range wf.Jobs["e2e"].Steps {
			switch {
			case strings.Contains(s.Run, `KERNEL=="kvm", GROUP="kvm", MODE="0666"`) && strings.Contains(s.Run, "udevadm trigger --name-match=kvm"):
				kvm = i
				if s.If != "runner.environment == 'github-hosted'" {
					t.Errorf("%s: the /dev/kvm step runs if %q", path, s.If)
				}
			case strings.Contains(s.Run, "fs.inotify.max_user_watches=524288 fs.inotify.max_user_instances=8192 fs.inotify.max_queued_events=65536"):
				sysctl = i
				// A self-hosted runner gets the limits raised too where the job may (sudo -n), never
				// lowered, and a warning naming the owner's part where it may not.
				if s.If != "runner.os == 'Linux'" || !strings.Contains(s.Run, `sudo -n sysctl -w "$kv"`) || !strings.Contains(s.Run, `[ "$have" -ge "$want" ] && continue`) ||
					!strings.Contains(s.Run, "::warning::") {
					t.Errorf("%s: the inotify step runs if %q:\n%s", path, s.If, s.Run)
				}
			case harness < 0 && (strings.Contains(s.Run, "make e2e") || strings.Contains(s.Run, "bin/e2e run")):
				harness = i
			}
		}
		if kvm < 0 || sysctl < 0 || harness < 0 || kvm > harness || sysctl > harness {
			t.Errorf("%s: kvm step %d, sysctl step %d, harness step %d", path, kvm, sysctl, harness)
		}
	}
}

var pinnedUses = regexp.MustCompile(`^\s*(?:-\s+)?uses:\s+([\w.-]+/[\w.-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$`)

// Every third-party action in every workflow is pinned by full commit, its version in a
// comment, at the commit workflows.ActionPins records for it.
func TestEveryActionIsPinnedByCommit(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", ".github", "workflows", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("workflows: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, "uses:") || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			m := pinnedUses.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("%s:%d: %q is not owner/repo@<40-hex commit> # vX.Y.Z", f, i+1, strings.TrimSpace(line))
				continue
			}
			if p, ok := ActionPins[m[1]]; !ok || p.Commit != m[2] || p.Tag != m[3] {
				t.Errorf("%s:%d: %s@%s # %s is not the pin workflows.ActionPins records (%+v)", f, i+1, m[1], m[2], m[3], p)
			}
		}
	}
}

// between is the text of s between the first from and the next to.
func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		t.Fatalf("%q lacks %q", s, from)
	}
	out, _, ok := strings.Cut(rest, to)
	if !ok {
		t.Fatalf("%q lacks %q", s, to)
	}
	return out
}

// Every kind job names its cluster and docker network after the run and the lane (one per job,
// the same across its attempts, so a rerun deletes a cancelled attempt's leftover and two jobs on
// one host never share a name or, through the network's subnet, MetalLB's range), and removes
// both in a last step that runs also after a failure, a timeout or a cancellation.
func TestKindJobsOwnTheirClusterAndCleanUpAlways(t *testing.T) {
	_, wfs, _ := shippedWorkflows(t)
	for path, wf := range wfs {
		job := wf.Jobs["e2e"]
		laneExpr := "matrix.lane"
		if strings.HasSuffix(path, "e2e-lane.yaml") {
			laneExpr = "inputs.lane"
		}
		want := "e2e-${{ github.run_id }}-${{ " + laneExpr + " }}"
		if job.Env["E2E_KIND_CLUSTER"] != want || job.Env["KIND_EXPERIMENTAL_DOCKER_NETWORK"] != want {
			t.Errorf("%s: cluster %q, network %q, want both %q", path, job.Env["E2E_KIND_CLUSTER"], job.Env["KIND_EXPERIMENTAL_DOCKER_NETWORK"], want)
		}
		last := job.Steps[len(job.Steps)-1]
		if last.If != "always()" || !strings.Contains(last.Run, "bin/e2e down --lane ${{ "+laneExpr+" }}") ||
			!strings.Contains(last.Run, `docker network rm "$KIND_EXPERIMENTAL_DOCKER_NETWORK"`) {
			t.Errorf("%s: the last step is %q if %q:\n%s", path, last.Name, last.If, last.Run)
		}
	}
}
