package e2ecmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// extendsSim writes, outside the checkout, a lane that says no substrate of its own: it
// extends the checkout's sim lane by its absolute path.
func extendsSim(t *testing.T) string {
	t.Helper()
	sim, err := filepath.Abs(filepath.Join("..", "..", "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "sim-mine.yaml")
	if err := os.WriteFile(p, []byte("name: sim-mine\nextends: "+sim+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// e2e substrate is the loaded lane's: a lane that extends sim is a sim lane.
func TestSubstrateIsTheLoadedLanes(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"substrate", "--lane", extendsSim(t)}, &out, &errb); code != exitPass {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := strings.TrimSpace(out.String()); got != "sim" {
		t.Errorf("substrate of a lane that extends sim: %q; want sim", got)
	}
}

// make e2e builds the tools for a lane that extends sim, named by its file: it asks the lane
// (e2e substrate), not a grep of the file. bin/e2e is a stand-in that answers sim and records
// its calls (GO=true leaves it as it is); the tools build is an echo.
func TestMakeE2EBuildsTheToolsForALaneThatExtendsSim(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	fake := "#!/bin/sh\necho \"$@\" >> " + calls + "\n[ \"$1\" = substrate ] && echo sim\nexit 0\n"
	if err := os.WriteFile(filepath.Join(bin, "e2e"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	lanePath := extendsSim(t)
	cmd := exec.Command("make", "-s", "-C", filepath.Join("..", ".."), "e2e", "BIN="+bin, "GO=true", "LANE="+lanePath,
		"TOOLS_BUILD=echo tools-built", "E2E_TOOLS_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make e2e: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "tools-built") {
		t.Errorf("make e2e LANE=%s did not build the tools; output:\n%s", lanePath, out)
	}
	got, _ := os.ReadFile(calls)
	if !strings.Contains(string(got), "substrate --lane "+lanePath) {
		t.Errorf("make e2e did not ask the lane its substrate; bin/e2e calls:\n%s", got)
	}
}

// --check says what it accepted: the lane, the file it extends, its substrate, each suite's
// folder as the run builds it, the budget's sum.
func TestCheckSaysWhatItAccepted(t *testing.T) {
	var out, errb bytes.Buffer
	lanePath := filepath.Join("..", "..", "examples", "nodelabels", "lanes", "sim-nodelabels.yaml")
	if code := dispatch(context.Background(), []string{"run", "--check", "--lane", lanePath}, &out, &errb); code != exitPass {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	dir, _ := filepath.Abs(filepath.Join("..", "..", "examples", "nodelabels"))
	for _, want := range []string{"lane sim-nodelabels ok", "extends ", "substrate sim", "nodelabels in " + dir, "phases 9m30s + per-pool 40s", "of jobCap 14m"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--check said %q; want it to say %q", out.String(), want)
		}
	}
	// The run's first line names its artifacts folder as "artifacts <dir>", which make e2e's
	// readers look for; the check comes first and must not say it of anything else.
	if m := regexp.MustCompile(`artifacts \S+`).FindString(out.String()); m != "" {
		t.Errorf("--check says %q, which reads as the run's artifacts folder", m)
	}
}
