// Package workflows generates the GitHub workflows that run the kind lanes (the e2e workflow
// and the reusable one another repository calls) from the lane files, and holds the CI workflow,
// written by hand, to the sim lanes.
package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/template"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// WorkflowPath is where the generated e2e workflow lives, relative to the project root.
const WorkflowPath = ".github/workflows/e2e.yaml"

// ReusableWorkflowPath is the generated reusable workflow (on: workflow_call) another
// repository calls to run one kind lane against its own build.
const ReusableWorkflowPath = ".github/workflows/e2e-lane.yaml"

// HarnessRepository is this harness's GitHub repository, which the reusable workflow checks out.
const HarnessRepository = "cozystack/cozy-e2e"

// ActionPin is a third-party action at a full commit, with the tag it is.
type ActionPin struct {
	Commit, Tag string
}

// ActionPins are the actions the workflows use, each pinned to the commit of its newest v4/v5
// tag (git rev-parse <tag>^{commit} in the action's repository).
var ActionPins = map[string]ActionPin{
	"actions/checkout":          {"11d5960a326750d5838078e36cf38b85af677262", "v4.4.0"},
	"actions/setup-go":          {"40f1582b2485089dde7abd97c1529aa768e1baff", "v5.6.0"},
	"actions/upload-artifact":   {"ea165f8d65b6e75b540449e92b4886f43607fa02", "v4.6.2"},
	"actions/download-artifact": {"d3f86a106a0bac45b974a628896c90dbdf5c8093", "v4.3.0"},
	"actions/cache":             {"0057852bfaa89a56745cba8c7296529d2fc39830", "v4.3.0"},
}

func uses(action string) (string, error) {
	p, ok := ActionPins[action]
	if !ok {
		return "", fmt.Errorf("action %s has no pin in workflows.ActionPins", action)
	}
	return action + "@" + p.Commit + " # " + p.Tag, nil
}

// workflowData is what both workflows are generated from.
type workflowData struct {
	Lanes []*lane.Lane
	// LaneNames, EveryChange, Nightly, RunsOn and Timeouts are JSON for the workflows'
	// fromJSON: the kind lanes, those of them that run on every pull request and push (not
	// runner.nightly), those the nightly schedule runs (Scheduled), each lane's runner labels,
	// each lane's job cap in minutes.
	LaneNames, EveryChange, Nightly, RunsOn, Timeouts string
	// The inotify limits the hosted-runner step sets: the highest any kind lane asks.
	Watches, Instances, Queued int
	// Setups say, per kind lane, the management setup it installs and the tenant clusters it
	// runs there; Aliases are the old lane names the reusable workflow still takes.
	Setups  []string
	Aliases []string
	// CallRunsOn and CallTimeouts are RunsOn and Timeouts with the old names too.
	CallRunsOn, CallTimeouts string
}

const sharedSteps = `
{{- define "start"}}
      - name: Record the job start (the lane budget counts from here)
        run: echo "E2E_JOB_START=$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$GITHUB_ENV"
      # A GitHub-hosted larger runner has KVM, but /dev/kvm is not open to the runner user and
      # the inotify limits are below what the Cozystack generic install guide asks. Both are
      # set before the preflight, which checks them and names what a runner still lacks.
      - name: Open /dev/kvm to the runner user (GitHub-hosted runners)
        if: runner.environment == 'github-hosted'
        run: |
          echo 'KERNEL=="kvm", GROUP="kvm", MODE="0666", OPTIONS+="static_node=kvm"' | sudo tee /etc/udev/rules.d/99-kvm4all.rules
          sudo udevadm control --reload-rules
          sudo udevadm trigger --name-match=kvm
      # The inotify limits are the kernel's, so every Linux runner gets them raised where the job
      # may (passwordless sudo: GitHub-hosted runners, a self-hosted one whose owner allows it),
      # never lowered; where it may not, the preflight names the lines the runner's owner sets.
      - name: Raise the inotify limits (where the runner lets the job)
        if: runner.os == 'Linux'
        run: |
          for kv in fs.inotify.max_user_watches={{.Watches}} fs.inotify.max_user_instances={{.Instances}} fs.inotify.max_queued_events={{.Queued}}; do
            key=${kv%%=*} want=${kv#*=} have=$(sysctl -n "${kv%%=*}")
            [ "$have" -ge "$want" ] && continue
            sudo -n sysctl -w "$kv" || echo "::warning::$key is $have, the lane needs $want, and this runner gives the job no passwordless sudo: its owner sets it as root (the preflight names the lines)"
          done
{{- end -}}
{{- define "kindenv"}}
      # One kind cluster and one docker network per job, the same across its attempts: the run
      # deletes a leftover of a cancelled attempt before creating, and two jobs on one host never
      # share a cluster name or, since MetalLB's range comes from the network's subnet, an address.
      E2E_KIND_CLUSTER: e2e-${{ "{{" }} github.run_id {{ "}}" }}-${{ "{{" }} {{.}} {{ "}}" }}
      KIND_EXPERIMENTAL_DOCKER_NETWORK: e2e-${{ "{{" }} github.run_id {{ "}}" }}-${{ "{{" }} {{.}} {{ "}}" }}
{{- end -}}
{{- define "cleanup"}}
      # always() runs after a failure, a timeout and a cancellation too.
      - name: Remove the job's kind cluster and docker network
        if: always()
        run: |
          make bin/e2e && bin/e2e down --lane ${{ "{{" }} {{.}} {{ "}}" }}
          if docker network inspect "$KIND_EXPERIMENTAL_DOCKER_NETWORK" >/dev/null 2>&1; then docker network rm "$KIND_EXPERIMENTAL_DOCKER_NETWORK"; fi
{{- end -}}
`

var workflowTmpl = template.Must(template.New("wf").Funcs(template.FuncMap{"uses": uses}).Parse(sharedSteps + `# Code generated by ` + "`make workflows`" + ` from lanes/*.yaml. DO NOT EDIT.
# Each lane's timeout-minutes is its budget.jobCap and its runner its runner.runsOn;
# ` + "`make workflows-check`" + ` fails on drift. One job per management setup (platform source,
# management Kubernetes) on pull requests and pushes: a lane's tenant versions are conformance
# clusters of its one install, not jobs.
{{- range .Setups}}
#   {{.}}
{{- end}}
name: e2e

on:
  pull_request:
  push:
    branches: [main]
  schedule:
    - cron: "0 2 * * *"
  workflow_dispatch:
    inputs:
      lane:
        description: "The kind lane to run (all: every kind lane)"
        type: choice
        options: [all{{range .Lanes}}, {{.Name}}{{end}}]
        default: all
      platform-source:
        description: "E2E_PLATFORM_SOURCE: release:<version>@sha256:<hex> or manifest:<path or https URL>@sha256:<hex> (empty: the lane's platform.source)"
        required: false
        default: ""
      runs-on:
        description: 'Runner labels as a JSON list, e.g. ["ubuntu-24.04-16core"] for a GitHub-hosted larger runner (empty: the lane''s runner.runsOn)'
        required: false
        default: ""

permissions:
  contents: read

jobs:
  e2e:
    name: e2e (${{ "{{" }} matrix.lane {{ "}}" }})
    # A pull request from a fork never reaches these runners: its head repository is not this
    # one (Cozystack runs fork pull requests' e2e from a separate workflow_run workflow).
    if: github.event_name != 'pull_request' || github.event.pull_request.head.repo.full_name == github.repository
    # One run per ref and lane; a newer push to a pull request replaces the running one.
    concurrency:
      group: e2e-${{ "{{" }} github.ref {{ "}}" }}-${{ "{{" }} matrix.lane {{ "}}" }}
      cancel-in-progress: ${{ "{{" }} github.event_name == 'pull_request' {{ "}}" }}
    strategy:
      fail-fast: false
      matrix:
        # A dispatch runs the lane it names, or every kind lane; the nightly schedule one lane per
        # management setup, its runner.nightly lane where it has one (which runs every spec of
        # the others on the same install); a pull request or push those without runner.nightly.
        lane: ${{ "{{" }} fromJSON(inputs.lane && inputs.lane != 'all' && format('["{0}"]', inputs.lane) || github.event_name == 'schedule' && '{{.Nightly}}' || github.event_name == 'workflow_dispatch' && '{{.LaneNames}}' || '{{.EveryChange}}') {{ "}}" }}
    runs-on: ${{ "{{" }} (inputs.runs-on || vars.E2E_RUNS_ON) && fromJSON(inputs.runs-on || vars.E2E_RUNS_ON) || fromJSON('{{.RunsOn}}')[matrix.lane] {{ "}}" }}
    timeout-minutes: ${{ "{{" }} fromJSON('{{.Timeouts}}')[matrix.lane] {{ "}}" }}
    env:
      E2E_ARTIFACTS: _artifacts/${{ "{{" }} matrix.lane {{ "}}" }}
      # The kind lanes install the platform from here when set (a dispatch input, else the
      # repository variable); empty means the lane's own platform.source.
      E2E_PLATFORM_SOURCE: ${{ "{{" }} inputs.platform-source || vars.E2E_PLATFORM_SOURCE {{ "}}" }}
{{- template "kindenv" "matrix.lane"}}
    steps:
{{- template "start" .}}
      - uses: {{uses "actions/checkout"}}
      - uses: {{uses "actions/setup-go"}}
        with:
          go-version-file: go.mod
      # bin/e2e carries the exit code contract (0 pass, 1 hard failure, 2 configuration or
      # preflight, 3 soft failures only, 130 interrupted); make would turn every failure into 2.
      - name: bin/e2e run --lane ${{ "{{" }} matrix.lane {{ "}}" }}
        run: make bin/e2e && bin/e2e run --lane ${{ "{{" }} matrix.lane {{ "}}" }}
      - name: Upload the artifacts
        if: always()
        uses: {{uses "actions/upload-artifact"}}
        with:
          name: e2e-${{ "{{" }} matrix.lane {{ "}}" }}-${{ "{{" }} github.run_attempt {{ "}}" }}
          path: _artifacts/${{ "{{" }} matrix.lane {{ "}}" }}
          if-no-files-found: warn
{{- template "cleanup" "matrix.lane"}}
`))

// Workflow renders the e2e workflow: a matrix over the kind lanes (one on dispatch), each
// with its job cap as timeout-minutes and its runner labels. Lanes are given in any order; the
// output is sorted by name.
func Workflow(lanes []*lane.Lane) ([]byte, error) { return render(workflowTmpl, lanes) }

// ReusableWorkflow renders the reusable workflow that runs one kind lane for a caller.
func ReusableWorkflow(lanes []*lane.Lane) ([]byte, error) { return render(reusableTmpl, lanes) }

// Workflows are both generated workflows by their path under the project root.
func Workflows(lanes []*lane.Lane) (map[string][]byte, error) {
	wf, err := Workflow(lanes)
	if err != nil {
		return nil, err
	}
	re, err := ReusableWorkflow(lanes)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{WorkflowPath: wf, ReusableWorkflowPath: re}, nil
}

func render(t *template.Template, lanes []*lane.Lane) ([]byte, error) {
	var kind []*lane.Lane
	for _, l := range lanes {
		if l.Substrate == lane.SubstrateKind {
			kind = append(kind, l)
		}
	}
	if len(kind) == 0 {
		return nil, fmt.Errorf("no kind lane: the e2e workflow would have an empty matrix")
	}
	sort.Slice(kind, func(i, j int) bool { return kind[i].Name < kind[j].Name })
	d := workflowData{Lanes: kind, Watches: assumptions.InotifyWatches, Instances: assumptions.InotifyInstances, Queued: assumptions.InotifyQueuedEvents}
	var names, everyChange []string
	runsOn := map[string][]string{}
	timeouts := map[string]int{}
	for _, l := range kind {
		names = append(names, l.Name)
		if !l.Runner.Nightly {
			everyChange = append(everyChange, l.Name)
		}
		runsOn[l.Name] = l.Runner.RunsOn
		if len(l.Runner.RunsOn) == 0 {
			runsOn[l.Name] = []string{"ubuntu-latest"}
		}
		timeouts[l.Name] = l.Budget.JobCap.Minutes()
		d.Watches = max(d.Watches, l.Runner.InotifyWatches)
		d.Instances = max(d.Instances, l.Runner.InotifyInstances)
	}
	if len(everyChange) == 0 {
		return nil, fmt.Errorf("every kind lane is runner.nightly: pull requests and pushes would get an empty e2e matrix")
	}
	if err := oneJobPerSetup(kind); err != nil {
		return nil, err
	}
	d.Setups = setupLines(kind)
	d.LaneNames, d.EveryChange, d.Nightly = compactJSON(names), compactJSON(everyChange), compactJSON(Scheduled(kind))
	d.RunsOn, d.Timeouts = compactJSON(runsOn), compactJSON(timeouts)
	// An old lane name a caller of the reusable workflow may still pass runs the lane it merged
	// into (Aliases).
	for _, old := range slices.Sorted(maps.Keys(lane.Aliases)) {
		a := lane.Aliases[old]
		if _, ok := runsOn[a.Lane]; ok {
			d.Aliases = append(d.Aliases, old)
			runsOn[old], timeouts[old] = runsOn[a.Lane], timeouts[a.Lane]
		}
	}
	d.CallRunsOn, d.CallTimeouts = compactJSON(runsOn), compactJSON(timeouts)
	var buf bytes.Buffer
	err := t.Execute(&buf, d)
	return buf.Bytes(), err
}

// compactJSON is v as JSON; the workflows quote it in single quotes, which JSON never holds.
func compactJSON(v any) string {
	data, _ := json.Marshal(v)
	return strings.ReplaceAll(string(data), "'", "")
}
