package lane

import (
	"path/filepath"
	"strings"
	"testing"
)

// A lane drops a phase it inherits: the sim lane's refusals leaves the budget of a lane whose
// suite never enters it; a phase the extended lane lacks cannot be dropped; a suite that needs
// a dropped phase is refused by name.
func TestAnInheritedPhaseCanBeDropped(t *testing.T) {
	dir := t.TempDir()
	body := "name: mine\nextends: " + simLane(t) + "\nbudget:\n  phases:\n    - name: refusals\n      drop: true\n"
	l, err := Load(writeLane(t, filepath.Join(dir, "mine.yaml"), body))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Budget.Phase("refusals"); ok {
		t.Errorf("refusals dropped, yet still in the budget: %v", l.Budget.Phases)
	}
	if _, ok := l.Budget.Phase("teardown"); !ok {
		t.Errorf("teardown lost with refusals: %v", l.Budget.Phases)
	}
	if errs := l.CheckSuites(SuiteCatalog{"kubernetes": {{Name: "refusals"}}}); len(errs) != 1 || !strings.Contains(errs[0].Error(), `has no phase "refusals"`) {
		t.Errorf("a suite needing the dropped phase: %v; want it refused by name", errs)
	}
	_, err = Load(writeLane(t, filepath.Join(dir, "other.yaml"), strings.ReplaceAll(strings.Replace(body, "refusals", "nosuch", 1), "mine", "other")))
	if err == nil || !strings.Contains(err.Error(), `drops phase "nosuch", which `+simLane(t)+" does not have") || !strings.Contains(err.Error(), "other.yaml:5:") {
		t.Errorf("dropping a phase the sim lane lacks: %v", err)
	}
}
