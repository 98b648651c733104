package testbed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// Pools is lane phase pools: every pool's join, running in the background from the moment its
// conformance cluster's control plane is up (Up), and each pool's record taken the moment it joined, so a spec
// judges a pool on what it did and not on the time another pool or cluster left it. The phase
// starts with the first control plane up, so it overlaps the tenant phase while the others come up.
// On a budget that gives clusters timelines of their own (lane.Phase.Cluster), each timeline
// has a pools phase of its own: it starts with the first of its clusters up and ends on its own
// (EndTimelineWhenJoined), while the others' joins go on.
type Pools struct {
	t *Tenant
	// base ends at Stop or End; the phase's context derives from it, not from the caller's, so
	// the phase outlives the Ginkgo node that started it.
	base   context.Context
	cancel context.CancelCauseFunc
	// joins are made with the Pools, one per pool; each is done once its join ended, or once it
	// is known that it never starts.
	joins   map[string]*joinRun
	endOnce sync.Once
	// shared is what Context gives on a budget with timelines: the run's context to its root
	// deadline, as no timeline's pools phase holds the work of the others.
	shared       context.Context
	sharedCancel context.CancelFunc

	mu      sync.Mutex
	phases  map[string]*poolsPhase // by timeline ("" for the shared phase)
	claimed map[*tenant.App]bool   // the clusters whose joins started, or were ended before they did
}

// poolsPhase is one pools phase: the shared one, or a timeline's.
type poolsPhase struct {
	ctx      context.Context // the phase's, once it started
	span     *budget.Span
	err      error // why the phase did not start (its budget was spent)
	watchers []*join.Watcher
	// ended is made when the phase starts to end and closed once its span ended (endPhase).
	ended chan struct{}
}

// joinRun is one pool's join in the background, and the record of the pool taken the moment
// it joined.
type joinRun struct {
	done chan struct{}
	rec  *join.Record
	err  error
	// notRun: the join never started because its cluster was not up (the tenant phase's
	// failure, not the pools phase's).
	notRun bool
}

// newPools is the pools phase of t, not started: its joins start as their clusters come up.
func (t *Tenant) newPools(parent context.Context) *Pools {
	base, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	ps := &Pools{t: t, base: base, cancel: cancel, joins: map[string]*joinRun{}, claimed: map[*tenant.App]bool{}, phases: map[string]*poolsPhase{}}
	for _, p := range t.Pools {
		ps.joins[p.Name()] = &joinRun{done: make(chan struct{})}
	}
	if t.o.Lane != nil && t.o.Lane.Budget.Timed() {
		ps.shared, ps.sharedCancel = t.o.Clock.Root(base)
	}
	return ps
}

// phase starts timeline tl's pools phase at its first call; its deadline comes from its
// ceiling.
func (ps *Pools) phase(tl string) (context.Context, *poolsPhase, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ph := ps.phases[tl]
	if ph == nil {
		ph = &poolsPhase{}
		ps.phases[tl] = ph
		ph.ctx, ph.span, ph.err = ps.t.o.Clock.Phase(budget.OnTimeline(ps.base, tl), PhasePools)
		if ph.err != nil {
			ph.ctx = nil
		} else if tl != "" {
			go ps.endWhenDone(tl)
		}
	}
	return ph.ctx, ph, ph.err
}

// overlapped notes on the pools phase, when it started before the tenant phase ended at end
// (its first cluster was up before the last), by how much: the two phases' times overlap.
func (ps *Pools) overlapped(end time.Time) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, ph := range ps.phases {
		if ph.span != nil && ph.span.Start().Before(end) {
			ph.span.Note(fmt.Sprintf("started %s before the tenant phase ended, with the first control plane up",
				end.Sub(ph.span.Start()).Round(100*time.Millisecond)))
		}
	}
}

// join starts the joins of conformance cluster a, whose control plane is up: its watcher,
// then one join per pool, each in the background. The first cluster's starts the phase. An
// error (the phase declined, the watcher not started) is each of a's pools' outcome too.
func (ps *Pools) join(a *tenant.App) error {
	t := ps.t
	if !ps.claim(a) {
		return nil
	}
	if ps.base.Err() != nil {
		ps.never(a, fmt.Errorf("the pools phase ended (%v) before the tenant cluster %s was up", context.Cause(ps.base), a.Names), false)
		return nil
	}
	ctx, ph, err := ps.phase(ps.timeline(a))
	if err != nil {
		ps.never(a, err, false)
		return err
	}
	var oses []osfamily.Family
	for _, p := range t.PoolsOf(a) {
		oses = append(oses, p.OS)
	}
	hub := t.Consoles()
	w, err := join.Start(ctx, join.Options{Management: t.o.Management, Tenant: a.Cluster, Namespace: a.Names.Namespace,
		OSes: oses, Clock: t.o.Clock, Log: t.o.JoinLog, OnProgress: t.o.OnProgress, Consoles: hub, Platform: t.o.Platform,
		WorkloadImage: t.o.Lane.Workload.Ref()})
	if err != nil {
		err = InPhase(PhasePools, "", err)
		ps.never(a, err, false)
		return err
	}
	ps.mu.Lock()
	ph.watchers = append(ph.watchers, w)
	ps.mu.Unlock()
	for _, p := range t.PoolsOf(a) {
		jr := ps.joins[p.Name()]
		go func() {
			defer close(jr.done)
			res, err := w.Join(ctx, p)
			if err != nil {
				jr.err = err
				return
			}
			jr.rec, jr.err = join.Inspect(ctx, join.InspectOptions{Management: t.o.Management, Tenant: p.Kubernetes()}, p, res)
		}()
	}
	return nil
}

// claim reports whether a's joins are still to be started or ended, and makes them the
// caller's to.
func (ps *Pools) claim(a *tenant.App) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.claimed[a] {
		return false
	}
	ps.claimed[a] = true
	return true
}

// notUp ends the joins of the clusters that never came up, as the tenant phase failed with
// err: failed holds each cluster's own error, if it had one before the others' failure ended
// its wait.
func (ps *Pools) notUp(apps []*tenant.App, failed map[*tenant.App]error, err error) {
	for _, a := range apps {
		if !ps.claim(a) {
			continue
		}
		why := fmt.Errorf("the tenant phase failed before the tenant cluster %s was up: %w", a.Names, err)
		if own, ok := failed[a]; ok && !errors.Is(own, context.Canceled) {
			why = fmt.Errorf("the tenant cluster %s did not come up: %w", a.Names, own)
		}
		ps.never(a, why, true)
	}
}

// never ends the joins of a's pools before they started, with err as their outcome; notRun
// says the tenant phase is why (the pools phase does not count them).
func (ps *Pools) never(a *tenant.App, err error, notRun bool) {
	for _, p := range ps.t.PoolsOf(a) {
		jr := ps.joins[p.Name()]
		jr.err, jr.notRun = fmt.Errorf("pool %s: its join never started: %w", p.Name(), err), notRun
		close(jr.done)
	}
}

// Context is the pools phase's context: work that belongs to the phase (a cluster rendering
// while the pools join) runs in it. Before the phase started it is the one the phase would
// derive from. On a budget with timelines, whose pools phases each end with their own
// clusters' joins, it is the run's context to its root deadline.
func (ps *Pools) Context() context.Context {
	if ps.shared != nil {
		return ps.shared
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ph := ps.phases[""]; ph != nil && ph.ctx != nil {
		return ph.ctx
	}
	return ps.base
}

// Await is pool's join outcome and record; it ends early when ctx ends (a spec interrupted).
func (ps *Pools) Await(ctx context.Context, pool string) (*join.Record, error) {
	if ps == nil {
		return nil, fmt.Errorf("pool %s: its join never started (the tenant phase failed first)", pool)
	}
	jr, ok := ps.joins[pool]
	if !ok {
		return nil, fmt.Errorf("pool %s: not a pool of the lane", pool)
	}
	select {
	case <-jr.done:
		if stopped := ps.stopped(); jr.err != nil && !jr.notRun && stopped != nil {
			return nil, fmt.Errorf("pool %s: its join was stopped (%v) while the pool was joining", pool, stopped)
		}
		return jr.rec, jr.err
	case <-ctx.Done():
		return nil, fmt.Errorf("pool %s: the spec ended (%v) while the pool was joining", pool, context.Cause(ctx))
	}
}

// Joined reports whether pool's join finished with a record, without waiting.
func (ps *Pools) Joined(pool string) (*join.Record, bool) {
	if ps == nil {
		return nil, false
	}
	jr, ok := ps.joins[pool]
	if !ok {
		return nil, false
	}
	select {
	case <-jr.done:
		return jr.rec, jr.err == nil && jr.rec != nil
	default:
		return nil, false
	}
}

// errPhaseEnded is why End stops the joins still running.
var errPhaseEnded = errors.New("the pools phase ended")

// Stop stops the joins still running, at once and without waiting for them, and keeps those
// of clusters not yet up from starting: a signal interrupted the run, and cause says which.
// End still ends the phase.
func (ps *Pools) Stop(cause error) {
	if ps != nil {
		ps.cancel(cause)
	}
}

// stopped is what stopped the joins (Stop), or nil.
func (ps *Pools) stopped() error {
	if c := context.Cause(ps.base); ps.base.Err() == context.Canceled && c != errPhaseEnded {
		return c
	}
	return nil
}

// End ends the pools phase, once: the joins still running are stopped, the informers closed;
// the phase's outcome is the joins' errors, or what stopped them (Stop). It waits for the
// joins of clusters not yet up until Up has given up on them.
func (ps *Pools) End() {
	if ps == nil {
		return
	}
	ps.endOnce.Do(ps.end)
}

// EndWhenJoined ends the pools phase (End) once every join has ended on its own: joined,
// failed, or run out of the phase's time. A spec that needs the phase ended (one in a phase of
// its own) calls it, so it stops no join still running, whatever the order of the specs. When
// ctx ends first (the spec was interrupted), the phase ends at once.
func (ps *Pools) EndWhenJoined(ctx context.Context) {
	if ps == nil {
		return
	}
	ended(ctx.Done(), slices.Collect(maps.Values(ps.joins)))
	ps.End()
}

// ended waits until every join of runs ended, or stop closed first (then it is false).
func ended(stop <-chan struct{}, runs []*joinRun) bool {
	for _, jr := range runs {
		select {
		case <-jr.done:
		case <-stop:
			return false
		}
	}
	return true
}

func (ps *Pools) end() {
	stopped := ps.stopped() // the joins ended because the run was interrupted, not on their own
	// Each phase's outcome is taken before the joins still running are stopped.
	outcomes := map[string]error{}
	ps.mu.Lock()
	tls := make([]string, 0, len(ps.phases))
	for tl := range ps.phases {
		tls = append(tls, tl)
	}
	ps.mu.Unlock()
	for _, tl := range tls {
		outcomes[tl] = stopped
		if stopped == nil {
			outcomes[tl] = outcome(ps.runsOf(tl))
		}
	}
	ps.cancel(errPhaseEnded)
	if ps.sharedCancel != nil {
		ps.sharedCancel()
	}
	for _, jr := range ps.joins {
		<-jr.done
	}
	for _, tl := range tls {
		ps.endPhase(tl, outcomes[tl])
	}
}
