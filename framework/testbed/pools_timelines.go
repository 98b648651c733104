package testbed

import (
	"context"
	"errors"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// A budget may give conformance clusters timelines of their own (lane.Phase.Cluster): each
// timeline has a pools phase of its own, started with the first of its clusters up and ended
// the moment their joins all ended, while the other timelines' joins go on.

// timeline is the timeline whose pools phase cluster a's joins run in: its own when the
// budget gives it a pools phase of its own, else "" (the shared phase).
func (ps *Pools) timeline(a *tenant.App) string {
	if l := ps.t.o.Lane; l != nil && l.OwnPhase(a.Role, PhasePools) {
		return l.TimelineOf(a.Role)
	}
	return ""
}

// endWhenDone ends timeline tl's pools phase the moment the joins of its clusters all ended
// (joined, failed, or out of the phase's time), while the other timelines' go on: nothing else
// runs in a timeline's pools phase, and its time is what its clusters' pools took.
func (ps *Pools) endWhenDone(tl string) {
	if runs := ps.runsOf(tl); ended(ps.base.Done(), runs) {
		ps.endPhase(tl, outcome(runs))
	} // else End ends it
}

// EndTimelineWhenJoined ends the pools phase of cluster's timeline once the joins of its
// clusters ended on their own, and leaves the other timelines' joins running: a spec on that
// timeline (a lifecycle spec on its pool) calls it first. On a budget without timelines it is
// EndWhenJoined.
func (ps *Pools) EndTimelineWhenJoined(ctx context.Context, cluster string) {
	if ps == nil {
		return
	}
	tl := ""
	for _, a := range ps.t.Apps {
		if a.Role == cluster {
			tl = ps.timeline(a)
		}
	}
	if tl == "" {
		ps.EndWhenJoined(ctx)
		return
	}
	runs := ps.runsOf(tl)
	if !ended(ctx.Done(), runs) {
		ps.End()
		return
	}
	ps.endPhase(tl, outcome(runs))
}

// outcome is the errors of the joins in runs that ended, those that never started for want of
// their cluster aside.
func outcome(runs []*joinRun) error {
	var errs []error
	for _, jr := range runs {
		select {
		case <-jr.done:
			if !jr.notRun {
				errs = append(errs, jr.err)
			}
		default:
		}
	}
	return errors.Join(errs...)
}

// runsOf are the joins of the pools whose cluster runs on timeline tl.
func (ps *Pools) runsOf(tl string) []*joinRun {
	var out []*joinRun
	for _, p := range ps.t.Pools {
		if ps.timeline(p.App) == tl {
			out = append(out, ps.joins[p.Name()])
		}
	}
	return out
}

// endPhase ends timeline tl's pools phase, once, with outcome: its informers are closed and
// its context released.
func (ps *Pools) endPhase(tl string, outcome error) {
	ps.mu.Lock()
	ph := ps.phases[tl]
	if ph == nil {
		ps.mu.Unlock()
		return
	}
	if ph.ended != nil {
		// Another caller is ending it (the timeline's own end, a spec's, End): the phase is
		// ended when that one's span is, not before.
		ended := ph.ended
		ps.mu.Unlock()
		<-ended
		return
	}
	ph.ended = make(chan struct{})
	ps.mu.Unlock()
	defer close(ph.ended)
	for _, w := range ph.watchers {
		w.Close()
	}
	if ph.span != nil {
		ph.span.End(outcome)
	}
}
