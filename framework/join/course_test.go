package join

import (
	"strings"
	"testing"
	"time"
)

// A pool that stood at disk-import for the whole budget and whose next look, taken once the
// budget had run out, shows it at vmi-running: the deadline names disk-import and the time the
// pool stood there within its budget, not "vmi-running for 0s".
func TestADeadlineNamesWhereThePoolStoodWhenItsBudgetRanOut(t *testing.T) {
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	end := start.Add(3 * time.Minute)
	c := newCourse("acme", start, end)
	c.look(StageBootstrapData, "0 of 1 Machines", start.Add(time.Second))
	c.look(StageDiskImport, "DataVolume d ImportInProgress 42%", start.Add(8*time.Second))
	// The budget ran out while the pool was being read: this look ends after it.
	c.look(StageVMIRunning, "VMI v Scheduled", end.Add(40*time.Millisecond))
	e := c.deadline(3*time.Minute, end.Add(50*time.Millisecond))
	if e.Stage != StageDiskImport {
		t.Errorf("stuck at %s, want disk-import: %v", e.Stage, e)
	}
	if want := end.Sub(start.Add(8 * time.Second)); e.Elapsed != want {
		t.Errorf("stuck for %s, want %s (from reaching disk-import to the end of the budget): %v", e.Elapsed, want, e)
	}
	if !e.At.Equal(end) {
		t.Errorf("decided at %s, want the end of the budget %s", e.At, end)
	}
}

// A pool that reached a stage well inside its budget is stuck there for as long as it stood
// there, and one that fell back names where to.
func TestADeadlineNamesTheFurthestStageAndTheFallBack(t *testing.T) {
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	end := start.Add(time.Minute)
	c := newCourse("md0", start, end)
	c.look(StageDiskImport, "DataVolume d 10%", start.Add(2*time.Second))
	c.look(StageBootstrapData, "0 of 1 Machines", start.Add(30*time.Second))
	e := c.deadline(time.Minute, end)
	if e.Stage != StageDiskImport || e.Elapsed != 58*time.Second {
		t.Errorf("stuck at %s for %s, want disk-import for 58s: %v", e.Stage, e.Elapsed, e)
	}
	if want := "fell back to bootstrap-data 30s ago"; !strings.Contains(e.Error(), want) {
		t.Errorf("%v: does not say %q", e, want)
	}
}
