package e2ecmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// Every knob the harness reads is refused, when bad, before anything starts: exit 2 within a
// second, a message naming the knob, its rule and an example, no artifacts folder and no temp
// folder made (so no process was started either: every process of a run lives in one).
func TestEveryKnobIsCheckedBeforeAnythingStarts(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "verdict.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	notBaseline := filepath.Join(t.TempDir(), "baseline.json")
	if err := os.WriteFile(notBaseline, []byte("[1, 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	kind := filepath.Join("..", "..", "lanes", "kubernetes.yaml")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string // in the message besides the knob's name
	}{
		{"LANE", nil, map[string]string{"LANE": "nope"}, []string{`lane "nope": no file`, "lanes here:"}},
		{"--lane", []string{"--lane", "nope"}, nil, []string{`lane "nope"`}},
		{"--lanes-dir", []string{"--lanes-dir", "no/such/dir"}, nil, []string{"--lanes-dir no/such/dir: no such folder", "example: --lanes-dir lanes"}},
		{"a flag that does not exist", []string{"--fast"}, nil, []string{"flag provided but not defined: -fast"}},
		{"E2E_ARTIFACTS not empty", nil, map[string]string{"E2E_ARTIFACTS": full}, []string{"is not empty", "example: E2E_ARTIFACTS="}},
		{"E2E_ARTIFACTS a file", nil, map[string]string{"E2E_ARTIFACTS": file}, []string{"is a file"}},
		{"E2E_JOB_START", nil, map[string]string{"E2E_JOB_START": "yesterday"}, []string{"is not an RFC 3339 time", "example: E2E_JOB_START=2026-12-02T10:00:00Z"}},
		{"E2E_JOB_START long ago", nil, map[string]string{"E2E_JOB_START": "2020-01-01T00:00:00Z"}, []string{"job cap 12m0s minus its artifact reserve has run out"}},
		{"E2E_JOB_START in the future", nil, map[string]string{"E2E_JOB_START": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, []string{"in the future"}},
		{"E2E_RUN_ID", nil, map[string]string{"E2E_RUN_ID": "UPPER_case!"}, []string{"1 to 10 lowercase letters or digits", "example: E2E_RUN_ID=ab12c"}},
		{"E2E_RUN_ID too long", nil, map[string]string{"E2E_RUN_ID": "abcdefghijk"}, []string{"1 to 10 lowercase"}},
		{"E2E_KEEP", nil, map[string]string{"E2E_KEEP": "yes"}, []string{"not one of"}},
		{"E2E_REUSE on sim", nil, map[string]string{"E2E_REUSE": "1"}, []string{"applies to kind lanes only"}},
		{"E2E_REUSE", []string{"--lane", kind}, map[string]string{"E2E_REUSE": "true"}, []string{"not one of 1, 0"}},
		{"E2E_FROM_PHASE", []string{"--lane", kind}, map[string]string{"E2E_FROM_PHASE": "install"}, []string{"is not a phase of", "(phases: preflight, cluster"}},
		{"E2E_FROM_PHASE on sim", nil, map[string]string{"E2E_FROM_PHASE": "tenant"}, []string{"applies to kind and existing lanes only"}},
		{"E2E_SIM_FAULT", nil, map[string]string{"E2E_SIM_FAULT": "meteor"}, []string{`"meteor" is not a sim fault (catalogue:`, "example: E2E_SIM_FAULT=guest-join-rejected@md0"}},
		{"E2E_SIM_FAULT pool", nil, map[string]string{"E2E_SIM_FAULT": "node-tainted@md9"}, []string{`targets pool "md9", which lane sim does not have (pools: md0, kairos, acme)`}},
		{"E2E_SIM_FAULT controller", nil, map[string]string{"E2E_SIM_FAULT": "controller-killed@md0"}, []string{`controller-killed names the controller after @ (one of capk,`, `not "md0"`}},
		{"E2E_SIM_FAULT on kind", []string{"--lane", kind}, map[string]string{"E2E_SIM_FAULT": "node-tainted"}, []string{"applies to sim lanes only"}},
		{"E2E_SIM_CANARY", nil, map[string]string{"E2E_SIM_CANARY": "abc"}, []string{"8 to 128 letters"}},
		{"E2E_BASELINE missing", nil, map[string]string{"E2E_BASELINE": "no/such/baseline.json"}, []string{"no such file"}},
		{"E2E_BASELINE broken", nil, map[string]string{"E2E_BASELINE": notBaseline}, []string{"baseline.json of a green run"}},
		{"E2E_TOOLS_DIR", nil, map[string]string{"E2E_TOOLS_DIR": "relative/tools"}, []string{"is not an absolute path"}},
		{"E2E_PLATFORM_SOURCE", []string{"--lane", kind}, map[string]string{"E2E_PLATFORM_SOURCE": "release:unknown"}, []string{"names no release"}},
		{"E2E_PLATFORM_SOURCE folder", []string{"--lane", kind}, map[string]string{"E2E_PLATFORM_SOURCE": "no/checkout"}, []string{"checkout no/checkout is not a folder here"}},
		{"E2E_PLATFORM_SOURCE manifest", []string{"--lane", kind}, map[string]string{"E2E_PLATFORM_SOURCE": "manifest:no/op.yaml"}, []string{"has no @sha256:<hex>"}},
		{"E2E_KIND_NODE_IMAGE", []string{"--lane", kind}, map[string]string{"E2E_KIND_NODE_IMAGE": "kindest/node:v1.35.0"}, []string{"has no digest", "example: E2E_KIND_NODE_IMAGE=kindest/node:v1.35.0@sha256:"}},
		{"E2E_KIND_NODE_IMAGE too new", []string{"--lane", kind}, map[string]string{"E2E_KIND_NODE_IMAGE": "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"},
			[]string{"it runs Kubernetes v1.37.0, outside the management range: Cluster API v1.13 supports v1.32 to v1.36"}},
		{"E2E_KIND_NODE_IMAGE on sim", nil, map[string]string{"E2E_KIND_NODE_IMAGE": "kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f"}, []string{"applies to kind lanes only"}},
		{"E2E_PLATFORM_REGISTRY", []string{"--lane", kind}, map[string]string{"E2E_PLATFORM_REGISTRY": "https://ghcr.io/x"}, []string{"names a scheme"}},
		{"E2E_PLATFORM_REGISTRY_USERNAME without its registry", []string{"--lane", kind}, map[string]string{"E2E_PLATFORM_REGISTRY_USERNAME": "robot", "E2E_PLATFORM_REGISTRY_PASSWORD": "a-secret-token-1"},
			[]string{"E2E_PLATFORM_REGISTRY is not set: registry credentials need the registry they are for"}},
		{"E2E_PLATFORM_REGISTRY_PASSWORD short", []string{"--lane", kind}, map[string]string{"E2E_PLATFORM_REGISTRY": "ghcr.io/x/y", "E2E_PLATFORM_REGISTRY_USERNAME": "robot", "E2E_PLATFORM_REGISTRY_PASSWORD": "hunter2"},
			[]string{"E2E_PLATFORM_REGISTRY_PASSWORD (value not shown): is under 8 characters"}},
		{"GITHUB_STEP_SUMMARY", nil, map[string]string{"GITHUB_STEP_SUMMARY": "/no/such/folder/summary.md"}, []string{"its folder /no/such/folder does not exist"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			art := filepath.Join(t.TempDir(), "artifacts")
			for _, k := range append(knobNames(), "LANE") {
				t.Setenv(k, "")
			}
			t.Setenv("E2E_ARTIFACTS", art)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			start := time.Now()
			code := dispatch(context.Background(), append([]string{"run"}, c.args...), &out, &errb)
			took := time.Since(start)
			if code != exitConfig {
				t.Errorf("exit %d, want %d; stderr: %s", code, exitConfig, errb.String())
			}
			if took > time.Second {
				t.Errorf("refused after %s, want under 1s", took)
			}
			msg := errb.String()
			name := c.name
			if i := strings.IndexByte(name, ' '); i > 0 {
				name = name[:i]
			}
			for _, w := range append(c.want, name) {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if out.Len() > 0 {
				t.Errorf("a refused run printed on stdout: %q", out.String())
			}
			if pw := c.env["E2E_PLATFORM_REGISTRY_PASSWORD"]; pw != "" && strings.Contains(msg, pw) {
				t.Errorf("the refusal repeats the password: %q", msg)
			}
			if _, err := os.Stat(art); err == nil {
				t.Errorf("the artifacts folder %s was made", art)
			}
			if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
				t.Errorf("something was started: %d entries in TMPDIR", len(entries))
			}
			if entries, _ := os.ReadDir(full); len(entries) != 1 {
				t.Errorf("the non-empty artifacts folder changed: %d entries", len(entries))
			}
		})
	}
}

// A controller fault names an upstream controller after "@" where the others name a pool: the
// lane's pools do not refuse it.
func TestFaultKnobTakesAControllerWhereOthersTakeAPool(t *testing.T) {
	l := &lane.Lane{Name: "sim", Pools: []lane.Pool{{Name: "md0"}}}
	for _, v := range []string{"controller-killed@virt-controller", "controller-crashloop@cdi-controller", "node-tainted@md0,controller-killed@capk"} {
		if err := checkFaults(v, l); err != nil {
			t.Errorf("E2E_SIM_FAULT=%s refused: %v", v, err)
		}
	}
	if err := checkFaults("node-tainted@virt-controller", l); err == nil || !strings.Contains(err.Error(), `targets pool "virt-controller"`) {
		t.Errorf("a pool fault aimed at a controller: %v, want it refused as a pool the lane lacks", err)
	}
}

// The message of each knob names its rule and an example, once.
func TestKnobMessagesGiveTheRuleAndAnExample(t *testing.T) {
	for _, k := range knobs {
		err := k.refuse("s3cr3t-value", errTest)
		msg := err.Error()
		prefix := k.name + `="s3cr3t-value": bad; want ` + k.rule
		if k.secret {
			// A credential's value is never repeated.
			prefix = k.name + " (value not shown): bad; want " + k.rule
		}
		if !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, "(example: "+k.name+"="+k.example+")") || (k.secret && strings.Contains(msg, "s3cr3t")) {
			t.Errorf("%s: %q", k.name, msg)
		}
	}
}

func knobNames() []string {
	var out []string
	for _, k := range knobs {
		out = append(out, k.name)
	}
	return out
}

var errTest = errString("bad")

type errString string

func (e errString) Error() string { return string(e) }

// A sim lane whose workers do not fit the sim's management Nodes is refused by --check, as by
// the run, before any phase: exit 2 with the arithmetic.
func TestCheckRefusesASimLaneTheSimCannotHold(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Replace(string(data), "  - name: md0\n    class: talos\n    replicas: 2\n", "  - name: md0\n    class: talos\n    replicas: 80\n", 1)
	if big == string(data) {
		t.Fatal("lanes/sim.yaml has no md0 of 2 workers; update the test")
	}
	path := filepath.Join(t.TempDir(), "sim.yaml")
	if err := os.WriteFile(path, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range append(knobNames(), "LANE") {
		t.Setenv(k, "")
	}
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"run", "--check", "--lane", path}, &out, &errb); code != exitConfig {
		t.Fatalf("exit %d, want %d: %s", code, exitConfig, errb.String())
	}
	if !strings.Contains(errb.String(), "pools: 82 worker VMs at once") || !strings.Contains(errb.String(), "run at most 74 workers at once") {
		t.Fatalf("message lacks the arithmetic: %s", errb.String())
	}
}
