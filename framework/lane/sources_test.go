package lane

import (
	"path/filepath"
	"testing"
)

// A kind lane says where each of its numbers comes from: the job cap and reserves in
// budget.note, every phase ceiling in its own note (make e2e-plan prints them).
func TestKindLanesNameTheSourceOfEveryNumber(t *testing.T) {
	lanes, err := LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lanes {
		if l.Substrate != SubstrateKind {
			continue
		}
		if l.Budget.Note == "" {
			t.Errorf("%s: budget.note does not say where the job cap and reserves come from", l.File)
		}
		for _, p := range l.Budget.Phases {
			if p.Note == "" {
				t.Errorf("%s: phase %s: no note saying where its ceiling %s comes from", l.File, p.Name, p.Ceiling)
			}
		}
		if l.Budget.JobCap.Minutes() > 255 {
			t.Errorf("%s: jobCap %s is over the 255 minutes Cozystack's e2e job may take", l.File, l.Budget.JobCap)
		}
	}
}
