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

// A suspect is announced once when it appears and once when upstream clears it; it keeps the
// time it began across looks (upstream's stamp when it gave one, else the first look), and the
// deadline names the suspects still there.
func TestSuspectsAppearClearAndReachTheDeadline(t *testing.T) {
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	end := start.Add(time.Minute)
	c := newCourse("kairos", start, end)
	c.look(StageBootstrapData, "no bootstrap data yet", start)
	boot := Suspect{Class: "bootstrap", Stage: StageBootstrapData, Object: "KairosConfig/m1", Detail: "failureReason x"}
	node := Suspect{Class: "identity", Stage: StageProviderID, Object: "Node/metal-1", Detail: "no providerID", Since: start.Add(20 * time.Second)}
	appeared, cleared := c.observe([]Suspect{boot}, start.Add(time.Second))
	if len(appeared) != 1 || len(cleared) != 0 || !appeared[0].Since.Equal(start.Add(time.Second)) {
		t.Fatalf("appeared %+v cleared %+v", appeared, cleared)
	}
	boot.Detail = "failureReason x (again)"
	if appeared, cleared = c.observe([]Suspect{boot}, start.Add(2*time.Second)); len(appeared)+len(cleared) != 0 {
		t.Fatalf("the same suspect again: appeared %+v cleared %+v", appeared, cleared)
	}
	if got := c.cur.Suspects; len(got) != 1 || !got[0].Since.Equal(start.Add(time.Second)) || got[0].Detail != boot.Detail {
		t.Fatalf("progress suspects %+v: want the first time seen and the newest detail", got)
	}
	appeared, cleared = c.observe([]Suspect{node}, start.Add(25*time.Second))
	if len(appeared) != 1 || appeared[0].Object != "Node/metal-1" || !appeared[0].Since.Equal(node.Since) || len(cleared) != 1 || cleared[0].Object != "KairosConfig/m1" {
		t.Fatalf("appeared %+v cleared %+v", appeared, cleared)
	}
	c.look(StageProviderID, "Node metal-1 has no providerID yet", start.Add(25*time.Second))
	e := c.deadline(time.Minute, end)
	if len(e.Suspects) != 1 || e.Suspects[0].Object != "Node/metal-1" || !strings.Contains(e.Error(), "suspect identity at provider-id since 10:00:20: no providerID") {
		t.Fatalf("%+v: %v", e.Suspects, e)
	}
}
