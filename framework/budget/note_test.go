package budget

import (
	"context"
	"testing"
)

// A phase's notes reach timings.json (and so the summary) beside its outcome.
func TestSpanNotesAreRecorded(t *testing.T) {
	f := &fakeClock{t: t0}
	c := New(testBudget(), Options{Now: f.Now, Lane: "x"})
	_, span, err := c.Phase(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	span.Note("install-time remediations: 1 in 1 HelmReleases: tenant-root/etcd 1")
	span.Note("second")
	span.End(nil)
	if got := c.Timings().Phases[0]; got.Outcome != OutcomeOK || got.Note != "install-time remediations: 1 in 1 HelmReleases: tenant-root/etcd 1; second" {
		t.Fatalf("%+v", got)
	}
}
