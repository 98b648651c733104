package progress

import (
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/join"
)

// A join's progress reaches the orchestrator as a detail event with the pool's wanted replicas
// and how many of its workers are past the stage; without an orchestrator there is no hook.
func TestJoinsTurnsAJoinsProgressIntoADetailEvent(t *testing.T) {
	if Joins(nil, nil) != nil {
		t.Fatal("Joins without a sink gave a hook; the joins would report to no one")
	}
	var got []Event
	since := time.Date(2026, 12, 6, 23, 0, 0, 0, time.UTC)
	hook := Joins(func(e Event) { got = append(got, e) }, map[string]int{"md0": 3})
	hook(join.Progress{Pool: "md0", Stage: "node-ref", Detail: "waiting for nodeRef (2 of 3 Machines past this stage)", Since: since,
		Suspects: []join.Suspect{{Stage: "node-ref", Class: "boot", Object: "VirtualMachineInstance/md0-x", Detail: "no console line for 60s"}}})
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	e := got[0]
	if e.Kind != Detail || e.Pool != "md0" || e.Stage != "node-ref" || e.Replicas != 3 || e.Past != 2 || !e.Since.Equal(since) || len(e.Suspects) != 1 {
		t.Errorf("event %+v: want a detail of md0 at node-ref since %s, 3 replicas, 2 past, one suspect", e, since)
	}
}
