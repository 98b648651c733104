package e2ecmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A lane that does not load ends the run at once with exit 2 and the lane's own message.
func TestRunRefusesABrokenLaneWithExit2(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../../lanes/sim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(data), "ceiling: 10s", "ceiling: soon", 1)
	if err := os.WriteFile(filepath.Join(dir, "sim.yaml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"run", "--lane", filepath.Join(dir, "sim.yaml")}, &out, &errb)
	if code != exitConfig {
		t.Fatalf("exit %d, want %d", code, exitConfig)
	}
	if !strings.Contains(errb.String(), `budget.phases[0].ceiling: "soon" is not a duration`) {
		t.Fatalf("message: %s", errb.String())
	}
}

// Two runs never mix their evidence in one folder.
func TestArtifactsFolderMustBeNew(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "verdict.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareArtifacts(t.TempDir(), dir, "sim", timeZero()); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("reused a non-empty artifacts folder: %v", err)
	}
	root := t.TempDir()
	got, err := prepareArtifacts(root, "", "sim", timeZero())
	if err != nil {
		t.Fatal(err)
	}
	if link, err := os.Readlink(filepath.Join(root, "_artifacts", "latest")); err != nil || link != filepath.Base(got) {
		t.Fatalf("latest -> %q (%v), want %q", link, err, filepath.Base(got))
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"fly"}, &out, &errb); code != exitConfig || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func timeZero() time.Time { return time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC) }

// A repro runs the lane file inside the artifacts with the run's own choices.
func TestReproRunsTheLaneCopyWithItsEnvironment(t *testing.T) {
	dir := t.TempDir()
	if code := dispatch(context.Background(), []string{"repro", "--artifacts", dir}, &bytes.Buffer{}, &bytes.Buffer{}); code != exitConfig {
		t.Fatalf("repro without repro.json: exit %d", code)
	}
	if err := os.MkdirAll(filepath.Join(dir, "lane"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A lane copy that does not load shows which file the repro used, without running anything.
	if err := os.WriteFile(filepath.Join(dir, "lane", "sim.yaml"), []byte("name: sim\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repro := `{"lane":"sim","laneFile":"lane/sim.yaml","runId":"ab1cd","env":{"E2E_SIM_FAULT":"node-tainted"},"command":"x"}`
	if err := os.WriteFile(filepath.Join(dir, "repro.json"), []byte(repro), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_SIM_FAULT", "")
	t.Setenv("E2E_RUN_ID", "")
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"repro", "--artifacts", dir}, &out, &errb)
	if code != exitConfig || !strings.Contains(errb.String(), filepath.Join(dir, "lane", "sim.yaml")+":2: bogus: unknown field") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if os.Getenv("E2E_SIM_FAULT") != "node-tainted" || os.Getenv("E2E_RUN_ID") != "ab1cd" {
		t.Fatalf("environment not restored: fault %q run id %q", os.Getenv("E2E_SIM_FAULT"), os.Getenv("E2E_RUN_ID"))
	}
}
