package budget

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// A phase on a cluster's own timeline keeps for later only its timeline's rest and the shared
// phases after every timeline, not the phases of the timelines beside it: with the same time
// left, the join cluster's pools phase starts while the lifecycle cluster's, with 13m of its
// timeline still to come, is declined. Each is recorded as its cluster's.
func TestAPhaseOnATimelineKeepsOnlyItsOwnRest(t *testing.T) {
	b := lane.Budget{
		JobCap: d("30m"), Margin: d("1m"), DiagnosticsReserve: d("1m"), ArtifactReserve: d("1m"),
		Phases: []lane.Phase{
			{Name: "tenant", Ceiling: d("2m")},
			{Name: "pools", Cluster: "join", Ceiling: d("3m")},
			{Name: "pools", Cluster: "lifecycle", Ceiling: d("3m")},
			{Name: "remediation", Cluster: "lifecycle", Ceiling: d("13m")},
			{Name: "teardown", Ceiling: d("4m")},
		},
	}
	fc := &fakeClock{t: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)}
	// The root is 29m after the start; 22m have gone: 7m left.
	c := New(b, Options{JobStart: fc.Now().Add(-22 * time.Minute), Now: fc.Now})
	ctx, span, err := c.Phase(OnTimeline(context.Background(), "join"), "pools")
	if err != nil {
		t.Fatalf("join's pools phase: %v", err)
	}
	// 7m left - diagnostics 1m - teardown 4m: 2m, under its 3m ceiling.
	if dl, _ := ctx.Deadline(); !dl.Equal(fc.Now().Add(2 * time.Minute)) {
		t.Errorf("join's pools phase ends at %s, want %s", dl, fc.Now().Add(2*time.Minute))
	}
	span.End(nil)
	_, _, err = c.Phase(OnTimeline(context.Background(), "lifecycle"), "pools")
	var ex *ExhaustedError
	if !errors.As(err, &ex) || ex.Reserved != 18*time.Minute || ex.Phase != "pools (cluster lifecycle)" {
		t.Fatalf("lifecycle's pools phase with 7m left: %v; want declined, 18m kept (diagnostics 1m, remediation 13m, teardown 4m)", err)
	}
	if _, _, err := c.Phase(context.Background(), "pools"); err == nil {
		t.Error("pools started off any timeline, where two timelines have one")
	}
	var got []string
	for _, p := range c.Timings().Phases {
		got = append(got, p.Label()+" "+string(p.Outcome))
	}
	if want := "pools (cluster join) ok,pools (cluster lifecycle) declined"; strings.Join(got, ",") != want {
		t.Errorf("timings %v, want %s", got, want)
	}
}
