package testbed

import (
	"context"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/join"
)

// On a budget that gives clusters timelines of their own (lanes/sim-lifecycle.yaml: the join
// cluster's and the lifecycle cluster's), each timeline's pools phase is its own: it ends the
// moment its clusters' joins ended, with their outcome, while the other timeline's joins go on;
// a spec on the lifecycle timeline waits for its own pools only.
func TestEachTimelineEndsItsOwnPoolsPhase(t *testing.T) {
	tn := laneTenant(t, "sim-lifecycle", Options{})
	clock := budget.New(tn.o.Lane.Budget, budget.Options{})
	tn.o.Clock = clock
	ps := tn.newPools(context.Background())
	// Joins in the background, released by hand, each in its timeline's pools phase.
	release := map[string]chan struct{}{}
	for _, p := range tn.Pools {
		jr := ps.joins[p.Name()]
		ctx, _, err := ps.phase(ps.timeline(p.App))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := budget.PhaseName(ctx), PhasePools; got != want {
			t.Fatalf("pool %s joins in phase %q, want %q", p.Name(), got, want)
		}
		rel := make(chan struct{})
		release[p.Name()] = rel
		go func() {
			defer close(jr.done)
			select {
			case <-rel:
				jr.rec = &join.Record{Result: &join.Result{}}
			case <-ctx.Done():
				jr.err = context.Cause(ctx)
			}
		}()
	}
	if len(ps.phases) != 2 {
		t.Fatalf("%d pools phases started, want one per timeline (join, lifecycle): %v", len(ps.phases), ps.phases)
	}
	ended := func(cluster string) bool {
		for _, p := range clock.Timings().Phases {
			if p.Name == PhasePools && p.Cluster == cluster {
				return true
			}
		}
		return false
	}
	// The join cluster's pool joins: its phase ends by itself, the lifecycle's runs on.
	close(release["md0"])
	deadline := time.Now().Add(5 * time.Second)
	for !ended("join") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !ended("join") || ended("lifecycle") {
		t.Fatalf("after md0 joined: join's pools phase ended %v (want true), lifecycle's %v (want false)", ended("join"), ended("lifecycle"))
	}
	// A lifecycle spec waits for the lifecycle cluster's pools only.
	done := make(chan struct{})
	go func() {
		ps.EndTimelineWhenJoined(context.Background(), "lifecycle")
		close(done)
	}()
	for _, p := range []string{"remed", "scale"} {
		close(release[p])
	}
	select {
	case <-done:
		t.Fatal("EndTimelineWhenJoined returned while pool roll was still joining")
	case <-time.After(100 * time.Millisecond):
	}
	close(release["roll"])
	<-done
	if !ended("lifecycle") {
		t.Fatal("the lifecycle cluster's pools phase did not end once its pools joined")
	}
	for _, p := range clock.Timings().Phases {
		if p.Outcome != budget.OutcomeOK {
			t.Errorf("phase %s: outcome %s (%s), want ok", p.Label(), p.Outcome, p.Error)
		}
	}
	if _, err := ps.Await(context.Background(), "md0"); err != nil {
		t.Errorf("pool md0 after its timeline ended: %v", err)
	}
	ps.End()
	if n := len(clock.Timings().Phases); n != 2 {
		t.Errorf("End recorded %d pools phases, want the two already ended and no more", n)
	}
}
