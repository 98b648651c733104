package progress

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// redraw is the cursor going up over the live lines and erasing them, to draw them again.
var redraw = regexp.MustCompile(`\x1b\[\d+A\x1b\[J`)

// liveScript drives a console through a pool's wait: a detail, a stage passed, a failure.
func liveScript(c *Console, now *fakeNow) {
	c.Event(Event{At: now.Now(), Kind: PhaseStart, Phase: "pools", Ceiling: 3 * time.Minute})
	c.Event(Event{At: now.Now(), Kind: Detail, Pool: "md0", Stage: "disk-import", Detail: "DataVolume md0-disk ImportInProgress 42%",
		Since: now.Now(), Replicas: 2, Past: 1})
	time.Sleep(600 * time.Millisecond) // a few redraws of the live line
	at := now.Add(2 * time.Second)
	c.Event(Event{At: at, Kind: StagePassed, Pool: "md0", Stage: "disk-import", Since: t0})
	c.Event(Event{At: at, Kind: Detail, Pool: "md0", Stage: "vmi-running", Detail: "VMI Scheduling", Since: at, Replicas: 2})
	time.Sleep(600 * time.Millisecond)
	c.Event(Event{At: now.Add(time.Second), Kind: Failure, Pool: "md0", Detail: "pool md0: vm-unschedulable at vmi-running: Insufficient memory"})
	c.Close()
	c.Printf("verdict: fail (exit 1)")
}

// On a terminal the pool's status line is drawn and redrawn in place (cursor up, erase), while
// the permanent lines scroll above it; after Close nothing is redrawn.
func TestOnATerminalThePoolLineIsRedrawnInPlace(t *testing.T) {
	now := &fakeNow{t: t0}
	var out testkit.Buffer
	c := NewConsole(Options{Out: &out, Live: true, Now: now.Now})
	liveScript(c, now)
	got := out.String()
	for _, w := range []string{
		"md0      [>           ]  0/12 disk-import", "1/2 past · DataVolume md0-disk ImportInProgress 42%",
		"[=>          ]  1/12 vmi-running", "phase pools",
		"10:00:02 pool md0: passed disk-import 2.0s\n",
		"10:00:03 FAIL pool md0: vm-unschedulable at vmi-running: Insufficient memory\n",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("the terminal lacks %q:\n%q", w, got)
		}
	}
	if !redraw.MatchString(got) {
		t.Errorf("no redraw in place (cursor up, erase below):\n%q", got)
	}
	if !strings.HasSuffix(got, "10:00:03 e2e: verdict: fail (exit 1)\n") {
		t.Errorf("the verdict is not the last thing on the terminal:\n%q", got[max(0, len(got)-300):])
	}
	checkErasedAtTheEnd(t, got)
	if strings.Count(got, "passed disk-import") != 1 {
		t.Errorf("a permanent line was printed more than once:\n%q", got)
	}
}

// The same on a real pseudo-terminal: the console finds it is a terminal by itself, sizes its
// lines to the terminal's width and redraws them in place.
func TestOnAPseudoTerminalTheConsoleDrawsLive(t *testing.T) {
	master, slave := openPty(t, 60)
	var out testkit.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&out, master); close(copied) }()
	if !IsTerminal(slave) && os.Getenv("TERM") != "dumb" {
		t.Fatal("a pseudo-terminal is not seen as a terminal")
	}
	now := &fakeNow{t: t0}
	c := NewConsole(Options{Out: slave, Live: true, Now: now.Now})
	liveScript(c, now)
	slave.Close()
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
	}
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	for _, w := range []string{"md0      [>           ]  0/12 disk-import", "10:00:02 pool md0: passed disk-import 2.0s\n",
		"10:00:03 FAIL pool md0: vm-unschedulable", "e2e: verdict: fail (exit 1)\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("the terminal lacks %q:\n%q", w, got)
		}
	}
	if !redraw.MatchString(got) {
		t.Errorf("no redraw in place (cursor up, erase below):\n%q", got)
	}
	checkErasedAtTheEnd(t, got)
	for _, l := range strings.Split(got, "\n") {
		l = redraw.ReplaceAllString(l, "")
		if strings.Contains(l, "md0 ") && strings.Contains(l, "[") && len([]rune(l)) > 60 {
			t.Errorf("a live line wider than the 60-column terminal: %q", l)
		}
	}
}

// openPty opens a pseudo-terminal cols wide and returns its two ends.
func openPty(t *testing.T, cols uint16) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: cols}); err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// checkErasedAtTheEnd: after the last redraw no live line is left on the screen, only the
// permanent lines printed after it.
func checkErasedAtTheEnd(t *testing.T, got string) {
	t.Helper()
	locs := redraw.FindAllStringIndex(got, -1)
	if len(locs) == 0 {
		return
	}
	rest := got[locs[len(locs)-1][1]:]
	if strings.Contains(rest, "phase pools") || strings.Contains(rest, "/12 ") {
		t.Errorf("live lines are left on the screen after the console closed:\n%q", rest)
	}
}

// A suspect shows on the pool's status line the moment its detail arrives, with its age, and
// harness.log says when it appeared and when upstream cleared it; the same detail again with
// only its suspects changed is not logged twice. Without a terminal the heartbeat carries it.
func TestASuspectIsShownOnThePoolLineAndLoggedUntilCleared(t *testing.T) {
	now := &fakeNow{t: t0}
	var out, log testkit.Buffer
	c := NewConsole(Options{Out: &out, Log: &log, Live: true, Now: now.Now})
	detail := Event{At: now.Now(), Kind: Detail, Pool: "kairos", Stage: "bootstrap-data", Detail: "Machine m1: no bootstrap data yet", Since: t0, Replicas: 1}
	c.Event(detail)
	sus := detail
	sus.At = now.Add(time.Second)
	sus.Suspects = []Suspect{{Class: "bootstrap", Stage: "bootstrap-data", Object: "KairosConfig/m1", Since: sus.At,
		Detail: `KairosConfig m1 reports failureReason BootstrapDataSecretGenerationFailed: secrets "pw" not found`}}
	c.Event(sus)
	now.Add(3 * time.Second)
	testkit.Eventually(t.Context(), t, "the suspect on the live line", 2*time.Second, testkit.Holds(func() bool {
		return strings.Contains(out.String(), "bootstrap-data 4.0s · 0/1 past · suspect bootstrap 3.0s: KairosConfig m1 reports")
	}))
	cleared := detail
	cleared.At = now.Add(time.Second)
	c.Event(cleared)
	c.Close()
	got := log.String()
	for _, w := range []string{
		"10:00:01.000 pool kairos: suspect bootstrap at bootstrap-data since 10:00:01.000 (KairosConfig/m1): KairosConfig m1 reports failureReason",
		"10:00:05.000 pool kairos: suspect bootstrap cleared after 4.0s (KairosConfig/m1)",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("harness.log lacks %q:\n%s", w, got)
		}
	}
	if n := strings.Count(got, "no bootstrap data yet (at this stage"); n != 1 {
		t.Errorf("the unchanged detail was logged %d times:\n%s", n, got)
	}
	now2 := &fakeNow{t: t0}
	var out2 testkit.Buffer
	c2 := NewConsole(Options{Out: &out2, Now: now2.Now, Heartbeat: time.Second})
	sus.At = t0
	c2.Event(sus)
	now2.Add(2 * time.Second)
	testkit.Eventually(t.Context(), t, "the heartbeat with the suspect", 2*time.Second, testkit.Holds(func() bool {
		return strings.Contains(out2.String(), "no bootstrap data yet; suspect bootstrap 1.0s: KairosConfig m1 reports")
	}))
	c2.Close()
}
