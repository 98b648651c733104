package workflows

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// reusableStep is the reusable workflow's step of that name.
func reusableStep(t *testing.T, name string) wfStep {
	t.Helper()
	_, wfs, _ := shippedWorkflows(t)
	for _, s := range wfs[ReusableWorkflowPath].Jobs["e2e"].Steps {
		if s.Name == name || s.ID == name {
			return s
		}
	}
	t.Fatalf("the reusable workflow has no step %q", name)
	return wfStep{}
}

// runStep runs a step's script with bash, as the runner does, in dir with env; it returns the
// exit code and what it printed.
func runStep(t *testing.T, s wfStep, dir string, env map[string]string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", "-e", "-c", s.Run)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// A workflow_run caller runs a fork's pull request: the reusable workflow takes the triggering
// run's id and head SHA, downloads its artifact with the caller's token, and runs only when the
// harness is pinned by commit, the platform is a downloaded manifest or a release (nothing of
// the fork is built on the runner) and no registry login came with it.
func TestAForksRunIsCheckedBeforeAnythingRuns(t *testing.T) {
	_, wfs, _ := shippedWorkflows(t)
	in := wfs[ReusableWorkflowPath].On.WorkflowCall.Inputs
	for _, name := range []string{"platform-run-id", "platform-head-sha"} {
		if in[name].Type != "string" || in[name].Default != "" || in[name].Required {
			t.Errorf("workflow_call input %s: %+v", name, in[name])
		}
	}
	check := reusableStep(t, "Check a fork's run (platform-run-id)")
	if check.If != "inputs.platform-run-id != ''" || check.Env["HAS_LOGIN"] != "${{ secrets.registry-username != '' || secrets.registry-password != '' }}" {
		t.Fatalf("the check step: %+v", check)
	}
	const sha = "0123456789abcdef0123456789abcdef01234567"
	good := map[string]string{"RUN_ID": "123456789", "HEAD_SHA": sha, "HARNESS_REF": sha, "SOURCE": "manifest:_platform/cozystack-operator-generic.yaml",
		"ARTIFACT": "operator-manifest", "HAS_LOGIN": "false"}
	summary := filepath.Join(t.TempDir(), "summary.md")
	with := func(k, v string) map[string]string {
		env := map[string]string{"GITHUB_STEP_SUMMARY": summary}
		for kk, vv := range good {
			env[kk] = vv
		}
		if k != "" {
			env[k] = v
		}
		return env
	}
	if code, out := runStep(t, check, t.TempDir(), with("", "")); code != 0 {
		t.Fatalf("a good fork run refused: %s", out)
	}
	if data, _ := os.ReadFile(summary); !strings.Contains(string(data), "platform built by run 123456789 at "+sha) {
		t.Fatalf("step summary %q", data)
	}
	for _, c := range []struct{ key, value, want string }{
		{"RUN_ID", "12; rm -rf /", "is not a run id"},
		{"HEAD_SHA", "main", "is not a full commit SHA"},
		{"HARNESS_REF", "main", "harness-ref 'main' is not a full commit"},
		{"SOURCE", "checkout:_platform", "builds nothing of the fork here"},
		{"SOURCE", "manifest:https://example.org/op.yaml@sha256:" + strings.Repeat("a", 64), "builds nothing of the fork here"},
		{"ARTIFACT", "", "needs platform-artifact"},
		{"HAS_LOGIN", "true", "a fork's run takes no registry login"},
	} {
		code, out := runStep(t, check, t.TempDir(), with(c.key, c.value))
		if code == 0 || !strings.Contains(out, "::error::") || !strings.Contains(out, c.want) {
			t.Errorf("%s=%q: exit %d, %q; want %q", c.key, c.value, code, out, c.want)
		}
	}

	// The artifact comes from the triggering run, with the caller's token; the calling
	// repository is never checked out for a fork, and no checkout leaves a token on disk.
	dl := reusableStep(t, "Download the platform artifact of run ${{ inputs.platform-run-id }}")
	if dl.If != "inputs.platform-artifact != '' && inputs.platform-run-id != ''" || dl.With["github-token"] != "${{ github.token }}" ||
		dl.With["run-id"] != "${{ inputs.platform-run-id }}" || !strings.HasPrefix(dl.Uses, "actions/download-artifact@") {
		t.Errorf("download from the triggering run: %+v", dl)
	}
	if s := reusableStep(t, "Check out the calling repository (checkout:_platform)"); !strings.Contains(s.If, "inputs.platform-run-id == ''") {
		t.Errorf("the calling repository is checked out for a fork: if %q", s.If)
	}
	for _, s := range wfs[ReusableWorkflowPath].Jobs["e2e"].Steps {
		if strings.HasPrefix(s.Uses, "actions/checkout@") && s.With["persist-credentials"] != false {
			t.Errorf("step %q keeps the token in .git/config: %v", s.Name, s.With)
		}
	}
	run := reusableStep(t, "bin/e2e run --lane ${{ inputs.lane }}")
	for _, k := range []string{"E2E_PLATFORM_REGISTRY_USERNAME", "E2E_PLATFORM_REGISTRY_PASSWORD"} {
		if !strings.HasPrefix(run.Env[k], "${{ inputs.platform-run-id == '' && secrets.") {
			t.Errorf("bin/e2e gets %s=%q, a fork's run included", k, run.Env[k])
		}
	}
	if run.Env["E2E_PLATFORM_SOURCE"] != "${{ steps.source.outputs.source }}" {
		t.Errorf("bin/e2e's platform source: %q", run.Env["E2E_PLATFORM_SOURCE"])
	}
}

// A downloaded manifest named without a digest is pinned at the sha256 of the file the run
// downloaded, which the run then verifies and records; a pinned one is kept as it is.
func TestTheDownloadedManifestIsPinned(t *testing.T) {
	pin := reusableStep(t, "source")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "_platform"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_platform", "op.yaml"), []byte("kind: Namespace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "output")
	for src, want := range map[string]string{
		"manifest:_platform/op.yaml":                                   fmt.Sprintf("source=manifest:_platform/op.yaml@sha256:%x", sha256.Sum256([]byte("kind: Namespace\n"))),
		"manifest:_platform/op.yaml@sha256:" + strings.Repeat("b", 64): "source=manifest:_platform/op.yaml@sha256:" + strings.Repeat("b", 64),
		"release:v1.6.2@sha256:" + strings.Repeat("c", 64):             "source=release:v1.6.2@sha256:" + strings.Repeat("c", 64),
	} {
		_ = os.Remove(out)
		if code, msg := runStep(t, pin, dir, map[string]string{"SOURCE": src, "GITHUB_OUTPUT": out}); code != 0 {
			t.Fatalf("%s: %s", src, msg)
		}
		if data, _ := os.ReadFile(out); strings.TrimSpace(string(data)) != want {
			t.Errorf("%s: output %q, want %q", src, data, want)
		}
	}
	if code, msg := runStep(t, pin, dir, map[string]string{"SOURCE": "manifest:_platform/missing.yaml", "GITHUB_OUTPUT": out}); code == 0 || !strings.Contains(msg, "no such file after the download") {
		t.Errorf("a missing manifest: exit %d %q", code, msg)
	}
}
