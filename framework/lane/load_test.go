package lane

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const good = `name: x
substrate: sim
kubernetes: {version: v1.35, patch: v1.35.6}
pools:
  - {name: md0, class: talos, replicas: 2}
workload: {image: docker.io/library/nginx, digest: sha256:4a73073bd557c65b759505da037898b61f1be6cbcc3c2c3aeac22d2a470c1752}
suites: [{name: kubernetes}]
budget:
  jobCap: 10m
  margin: 1m
  diagnosticsReserve: 1m
  artifactReserve: 30s
  phases:
    - {name: cluster, ceiling: 1m}
    - {name: pools, ceiling: 2m, timeouts: {schedulable: 30s}}
`

func TestParseAcceptsAValidLane(t *testing.T) {
	l, err := Parse("lanes/x.yaml", []byte(good))
	if err != nil {
		t.Fatalf("valid lane refused: %v", err)
	}
	a := l.Budget.Arithmetic()
	if a.Total != 5*time.Minute+30*time.Second || a.Headroom != 4*time.Minute+30*time.Second {
		t.Fatalf("arithmetic: total %s headroom %s", a.Total, a.Headroom)
	}
	if got := l.Budget.Phases[1].Timeouts["schedulable"].D(); got != 30*time.Second {
		t.Fatalf("named timeout = %s", got)
	}
}

// Each broken lane must be refused with a message naming the file, the field and the problem.
func TestParseRefusesBrokenLanes(t *testing.T) {
	cases := []struct {
		name, from, to string
		want           []string
	}{
		{"unknown field", "substrate: sim", "substrate: sim\nsubstrat: kind", []string{"lanes/x.yaml:3: substrat: unknown field", `did you mean "substrate"`}},
		{"nested unknown field", "{name: cluster, ceiling: 1m}", "{name: cluster, cieling: 1m}", []string{"budget.phases[0].cieling: unknown field", `did you mean "ceiling"`, "budget.phases[0].ceiling: is required"}},
		{"bad duration", "ceiling: 2m,", `ceiling: "29 min",`, []string{`lanes/x.yaml:15: budget.phases[1].ceiling: "29 min" is not a duration (use Go durations such as 29m`}},
		{"yaml error", "pools:\n", "pools: [\n", []string{"lanes/x.yaml: not valid YAML"}},
		{"missing required", "suites: [{name: kubernetes}]\n", "", []string{"lanes/x.yaml:1: suites: is required"}},
		{"duplicate phase", "{name: pools, ceiling: 2m", "{name: cluster, ceiling: 2m", []string{`budget.phases[1].name: "cluster" is declared twice`}},
		{"cap too small", "jobCap: 10m", "jobCap: 5m", []string{"lanes/x.yaml:8: budget: does not fit the job cap: phases 3m0s + diagnostics reserve 1m0s + artifact reserve 30s + margin 1m0s = 5m30s, which is 30s over jobCap 5m0s"}},
		{"unknown class", "class: talos", "class: ubuntu", []string{`pools[0].class: "ubuntu" is neither a built-in class`}},
		{"soft class unknown", "suites:", "policy: {soft: [flaky]}\nsuites:", []string{`policy.soft[0]: "flaky" is not a failure class`}},
		{"soft class never soft", "suites:", "policy: {soft: [configuration]}\nsuites:", []string{`policy.soft[0]: "configuration" can never be soft`}},
		{"name mismatch", "name: x", "name: y", []string{`name: "y" does not match the file name (want "x")`}},
		{"workload unpinned", "digest: sha256:4a73073bd557c65b759505da037898b61f1be6cbcc3c2c3aeac22d2a470c1752}", "digest: latest}", []string{`lanes/x.yaml:6: workload.digest: "latest" is not a sha256 digest`}},
		{"timeout above ceiling", "schedulable: 30s", "schedulable: 3m", []string{"budget.phases[1].timeouts.schedulable: 3m0s is above the phase ceiling 2m0s"}},
		{"patch of another minor", "patch: v1.35.6", "patch: v1.34.4", []string{"kubernetes.patch: v1.34.4 is not a release of v1.35"}},
		{"wrong type", "replicas: 2", "replicas: two", []string{`pools[0].replicas: "two" is not a whole number`}},
		{"cluster not a DNS label", "replicas: 2}", "replicas: 2, cluster: Classes}", []string{`lanes/x.yaml:5: pools[0].cluster: "Classes" is not a DNS label`}},
		{"cluster of the refusals", "replicas: 2}", "replicas: 2, cluster: refusals}", []string{`lanes/x.yaml:5: pools[0].cluster: "refusals" is the kubernetes suite's cluster of refused pools`}},
		{"cluster name too long", "replicas: 2}", "replicas: 2, cluster: classes-of-the-acme-vendor}", []string{
			`lanes/x.yaml:5: pools[0].cluster: pool "md0" in cluster "classes-of-the-acme-vendor": its Machine and VM names (kubernetes-<cluster>-<run id>-<pool>-<5>-<5>) reach 64 characters with a 10-character run id, over the 63 of a label value; shorten the pool or cluster name by 1`}},
		{"pool name too long", "name: md0,", "name: md0-with-a-long-name-abc,", []string{
			`lanes/x.yaml:5: pools[0].name: pool "md0-with-a-long-name-abc" in cluster "pools": its Machine and VM names (kubernetes-<cluster>-<run id>-<pool>-<5>-<5>) reach 64 characters`}},
		{"bad maxUnhealthy", "suites:", "sim: {machineHealthCheck: {maxUnhealthy: half}}\nsuites:",
			[]string{`sim.machineHealthCheck.maxUnhealthy: must be a bare integer (e.g. 0, 1) or an integer percentage (e.g. 50%), got "half"`}},
		{"nodeStartupTimeout too short", "suites:", "sim: {machineHealthCheck: {nodeStartupTimeout: 10s}}\nsuites:",
			[]string{`sim.machineHealthCheck.nodeStartupTimeout: 10s is under 30s, which Cluster API refuses`}},
		{"duplicate pool", "  - {name: md0, class: talos, replicas: 2}\n", "  - {name: md0, class: talos, replicas: 2}\n  - {name: md0, class: talos, replicas: 1}\n", []string{`pools[1].name: "md0" is declared twice`}},
		{"pool name not a label", "{name: md0,", "{name: MD0,", []string{`pools[0].name: "MD0" is not a DNS label`}},
		{"duplicate suite", "suites: [{name: kubernetes}]", "suites: [{name: kubernetes}, {name: kubernetes}]", []string{`suites[1].name: "kubernetes" is declared twice`}},
		{"suite name not a folder", "suites: [{name: kubernetes}]", "suites: [{name: Kubernetes}]", []string{`suites[0].name: "Kubernetes" is not a suite directory name`}},
		{"phase name not a label", "{name: cluster, ceiling: 1m}", "{name: Cluster, ceiling: 1m}", []string{`budget.phases[0].name: "Cluster" is not a phase name (lower case, digits, dashes)`}},
		{"real Node with a model-rendered pool", "  - {name: md0, class: talos, replicas: 2}\n", "  - {name: md0, class: talos, replicas: 2}\n  - {name: k, class: kairos, replicas: 1}\nsim: {realNode: true}\n",
			[]string{`lanes/x.yaml:6: pools[1].class: "kairos": a lane with sim.realNode runs only pools of the built-in talos class`}},
		{"nightly sim lane", "suites:", "runner: {nightly: true}\nsuites:", []string{"lanes/x.yaml:7: runner.nightly: is only for kind lanes: the e2e workflow runs no other"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := strings.Replace(good, tc.from, tc.to, 1)
			if data == good {
				t.Fatalf("case does not change the lane: %q not found", tc.from)
			}
			_, err := Parse("lanes/x.yaml", []byte(data))
			if err == nil {
				t.Fatalf("broken lane accepted")
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want lane.Errors: %v", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestComponentPins(t *testing.T) {
	base := good + "components:\n"
	cases := map[string]string{
		"  - {name: a, version: v1, image: quay.io/a}\n":                               "components[0].digest: image quay.io/a has no digest",
		"  - {name: a, version: v1, image: quay.io/a, digest: unknown}\n":              "components[0].note: a digest marked unknown needs a note",
		"  - {name: a, version: v1, image: quay.io/a, digest: sha256:abc}\n":           `components[0].digest: "sha256:abc" is neither sha256:<64 hex> nor "unknown"`,
		"  - {name: a, version: v1}\n  - {name: a, version: v2}\n":                     `components[1].name: "a" is declared twice`,
		"  - {name: a, version: v1, image: quay.io/a, digest: unknown, note: later}\n": "",
	}
	for comps, want := range cases {
		_, err := Parse("lanes/x.yaml", []byte(base+comps))
		switch {
		case want == "" && err != nil:
			t.Errorf("%q refused: %v", comps, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: want %q, got %v", comps, want, err)
		}
	}
}

// The lanes the project ships must load; this is what make lanes-check enforces too.
func TestShippedLanesLoad(t *testing.T) {
	lanes, err := LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, l := range lanes {
		names[l.Name] = true
		if h := l.Budget.Arithmetic().Headroom; h < 0 {
			t.Errorf("%s: budget over cap by %s", l.Name, -h)
		}
	}
	for _, want := range []string{"sim", "sim-lifecycle", "kubernetes", "kubernetes-lifecycle"} {
		if !names[want] {
			t.Errorf("lane %s missing", want)
		}
	}
}

func TestFindNamesTheKnownLanes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(dir, "x"); err != nil {
		t.Fatal(err)
	}
	_, err := Find(dir, "nope")
	if err == nil || !strings.Contains(err.Error(), "lanes here: x") {
		t.Fatalf("want the known lanes named, got %v", err)
	}
}

// The old lane names still load, for one release, as the lane they merged into, saying so; the
// lane's own name loads it without a deprecation.
func TestOldLaneNamesLoadTheMergedLane(t *testing.T) {
	dir := filepath.Join("..", "..", "lanes")
	for old, a := range Aliases {
		l, err := Find(dir, old)
		if err != nil {
			t.Fatalf("%s: %v", old, err)
		}
		if l.Name != a.Lane || !strings.Contains(l.Deprecation, "lane "+old+" is deprecated and runs lane "+a.Lane) || !strings.Contains(l.Deprecation, "the old name goes in the next release") {
			t.Errorf("%s: lane %s, deprecation %q", old, l.Name, l.Deprecation)
		}
	}
	l, err := Find(dir, "kubernetes")
	if err != nil || l.Deprecation != "" {
		t.Fatalf("the lane by its own name: %v %q", err, l.Deprecation)
	}
}
