package simlane

import (
	"os"
	"strings"
	"testing"
)

// A green lifecycle run under make test's load (testdata/lifecycle-green-under-load.txt, 15
// minutes, 95 lines) holds the console's contract: 69 lines besides 26 heartbeats, each
// subject's heartbeats 30 s apart. Counting its heartbeats against a fixed number of lines, as
// the bound did before, failed it; a heartbeat repeated sooner than its pace, or a run printing
// more lines besides its heartbeats, still fails.
func TestConsoleContractHoldsASlowGreenLifecycleRun(t *testing.T) {
	b, err := os.ReadFile("testdata/lifecycle-green-under-load.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	lifecycle := consoleBound{lines: maxGreenLifecycleLines, heartbeatsFree: true}
	if p := consoleProblems(out, "green", false, lifecycle, t.Logf); len(p) != 0 {
		t.Errorf("the slow green run breaks the lifecycle lane's contract: %q", p)
	}
	if p := consoleProblems(out, "green", false, consoleBound{lines: 92}, t.Logf); len(p) != 1 || !strings.Contains(p[0], "printed 95 lines, want under 92") {
		t.Errorf("counted with its heartbeats against 92 lines, the run must fail once on its 95 lines; got %q", p)
	}
	if p := consoleProblems(out, "green", false, consoleBound{lines: 69, heartbeatsFree: true}, t.Logf); len(p) != 1 || !strings.Contains(p[0], "printed 69 lines besides its heartbeats, want under 69") {
		t.Errorf("a bound of 69 lines besides heartbeats must fail the run's 69; got %q", p)
	}

	// Heartbeats in words the check does not know: the lines besides them cannot be counted.
	reworded := strings.NewReplacer(": at ", ": waiting at ", " of 2m0s", " (of 2m0s)", " of 3m0s", " (of 3m0s)", " of 4m0s", " (of 4m0s)",
		" of 5m0s", " (of 5m0s)", " of 5m30s", " (of 5m30s)", " of 1m0s", " (of 1m0s)").Replace(out)
	if p := consoleProblems(reworded, "green", false, consoleBound{lines: 1000, heartbeatsFree: true}, t.Logf); len(p) != 1 || !strings.Contains(p[0], "no heartbeat recognised") {
		t.Errorf("heartbeats the check cannot recognise must fail the lifecycle bound; got %q", p)
	}

	// The rollout phase's second heartbeat 10 s after its first.
	fast := strings.Replace(out, "16:47:09 phase rollout (cluster lifecycle) 1m0s of 4m0s", "16:46:49 phase rollout (cluster lifecycle) 40.1s of 4m0s", 1)
	if fast == out {
		t.Fatal("the fixture lost the rollout phase's second heartbeat")
	}
	p := consoleProblems(fast, "green", false, lifecycle, t.Logf)
	if len(p) != 1 || !strings.Contains(p[0], "phase rollout (cluster lifecycle) repeated its state 10s after the last time") {
		t.Errorf("a heartbeat 10 s after the last must fail the pace; got %q", p)
	}
	// A pool's heartbeat 20 s after its last, at another stage.
	fast = strings.Replace(out, "16:40:16 pool remed: at marked-unhealthy 30.1s", "16:40:06 pool remed: at marked-unhealthy 20.1s", 1)
	if p := consoleProblems(fast, "green", false, lifecycle, t.Logf); len(p) != 1 || !strings.Contains(p[0], "pool remed repeated its state 20s") {
		t.Errorf("a pool's heartbeat 20 s after its last must fail the pace; got %q", p)
	}
}
