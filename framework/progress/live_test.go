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
	var out syncBuffer
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
	var out syncBuffer
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
