package report

import (
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
)

// The pools phase that starts while the tenant phase waits for its last cluster is drawn on a
// row of its own, so the tenant phase's end stays visible; phases one after the other share a row.
func TestOverlappingPhasesAreDrawnOnRowsOfTheirOwn(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tl := BuildTimeline(budget.Timings{Phases: []budget.PhaseTiming{
		{Name: "cluster", Start: at(0), End: at(10), Outcome: budget.OutcomeOK},
		{Name: "tenant", Start: at(10), End: at(27), Outcome: budget.OutcomeOK},
		{Name: "pools", Start: at(15), End: at(60), Outcome: budget.OutcomeOK},
		{Name: "teardown", Start: at(60), End: at(70), Outcome: budget.OutcomeOK},
	}}, nil)
	var got []string
	for _, r := range tl.Rows {
		var bars []string
		for _, b := range r.Bars {
			bars = append(bars, b.Label)
		}
		got = append(got, r.Name+": "+strings.Join(bars, " "))
	}
	want := "phases: cluster tenant teardown | phases (overlapping): pools"
	if strings.Join(got, " | ") != want {
		t.Errorf("rows %s\nwant %s", strings.Join(got, " | "), want)
	}
}
