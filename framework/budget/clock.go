// Package budget is the run's clock: it turns a lane's budget into deadlines, one phase at a
// time on each timeline (the shared one, and each cluster's own when the budget gives it one),
// keeps the reserves of the phases still to come on the way to the end and of the diagnostics,
// records what was declined, and writes timings.json (planned against spent, per phase and per
// stage).
package budget

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Options tune a Clock.
type Options struct {
	// JobStart is when the CI job started (the workflow exports it); zero means now.
	JobStart time.Time
	// Now is the clock; nil means time.Now. Tests pass a fake.
	Now func() time.Time
	// Lane is the lane's name, written into timings.
	Lane string
	// Observer, when set, hears each phase start and end and each stage a pool passes as the
	// clock records it (progress for people). It is called without the clock's lock held.
	Observer Observer
}

// Observer hears what a Clock records, as it happens.
type Observer interface {
	PhaseStarted(name string, start, deadline time.Time, ceiling time.Duration)
	PhaseEnded(PhaseTiming)
	StagePassed(StageTiming)
}

// Clock hands out phase deadlines from one lane budget. It is safe for concurrent use.
type Clock struct {
	budget   lane.Budget
	now      func() time.Time
	jobStart time.Time
	root     time.Time
	laneName string
	observer Observer

	mu       sync.Mutex
	phases   []PhaseTiming
	stages   []StageTiming
	declined []Declined
	marks    []Mark
}

// New starts a clock for budget b. The root deadline is job start + job cap - artifact reserve:
// whatever happens, the run ends there, so the artifacts can still be written and uploaded.
func New(b lane.Budget, opts Options) *Clock {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	start := opts.JobStart
	if start.IsZero() {
		start = now()
	}
	return &Clock{
		budget:   b,
		now:      now,
		jobStart: start,
		root:     start.Add(b.JobCap.D() - b.ArtifactReserve.D()),
		laneName: opts.Lane,
		observer: opts.Observer,
	}
}

// JobStart is when the job started.
func (c *Clock) JobStart() time.Time { return c.jobStart }

// RootDeadline is the moment the run must be over (artifacts written) at the latest.
func (c *Clock) RootDeadline() time.Time { return c.root }

// Remaining is the time left until the root deadline.
func (c *Clock) Remaining() time.Duration { return c.root.Sub(c.now()) }

// Root returns ctx bounded by the root deadline.
func (c *Clock) Root(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, c.root)
}

// ExhaustedError says a phase could not start because the time it may use is already gone.
type ExhaustedError struct {
	Phase    string
	Deadline time.Time
	Now      time.Time
	Reserved time.Duration // what the diagnostics and later phases keep
}

// Judgement is a deadline at the declined phase (verdict.Judge).
func (e *ExhaustedError) Judgement() verdict.Judgement {
	return verdict.Judgement{Class: verdict.Deadline, Stage: e.Phase, At: e.Now}
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("phase %s declined: the budget is spent (%s past its latest end; %s is kept for diagnostics and the phases after it)",
		e.Phase, e.Now.Sub(e.Deadline).Round(time.Second), e.Reserved)
}

// UnknownPhaseError is a phase the lane's budget does not have: the lane cannot run what asked
// for it. It is a configuration error, never the product's.
type UnknownPhaseError struct {
	Phase string
	Known string
}

// Judgement is a configuration failure: the lane lacks the phase (verdict.Judge).
func (e *UnknownPhaseError) Judgement() verdict.Judgement {
	return verdict.Judgement{Class: verdict.Configuration}
}

func (e *UnknownPhaseError) Error() string {
	return fmt.Sprintf("phase %q is not in the lane budget (phases: %s); add it to budget.phases with a ceiling", e.Phase, e.Known)
}

// phaseDeadline is when phase name on cluster's timeline ("" for none) must end if it starts
// now: min(now + ceiling, root deadline - diagnostics reserve - reserves of the phases after
// it). A phase on a cluster's own timeline (lane.Phase.Cluster) keeps only its timeline's later
// phases and the shared ones after every timeline: the other timelines run beside it.
// It returns the phase too.
func (c *Clock) phaseDeadline(cluster, name string) (lane.Phase, time.Time, time.Duration, error) {
	idx := c.budget.PhaseOn(cluster, name)
	if idx < 0 {
		return lane.Phase{}, time.Time{}, 0, &UnknownPhaseError{Phase: name, Known: c.phaseNames()}
	}
	reserved := c.budget.DiagnosticsReserve.D() + c.budget.ReserveAfter(idx)
	now := c.now()
	latest := c.root.Add(-reserved)
	deadline := now.Add(c.budget.Phases[idx].Ceiling.D())
	if latest.Before(deadline) {
		deadline = latest
	}
	return c.budget.Phases[idx], deadline, reserved, nil
}

type timelineKey struct{}

// OnTimeline is ctx on conformance cluster's own timeline (lane.Lane.TimelineOf): a phase
// started in it is that cluster's own when the budget gives it one, else the shared phase.
func OnTimeline(ctx context.Context, cluster string) context.Context {
	return context.WithValue(ctx, timelineKey{}, cluster)
}

// TimelineOf is the cluster timeline ctx is on (OnTimeline), "" when none.
func TimelineOf(ctx context.Context) string {
	t, _ := ctx.Value(timelineKey{}).(string)
	return t
}

func (c *Clock) phaseNames() string {
	s := ""
	for i, p := range c.budget.Phases {
		if i > 0 {
			s += ", "
		}
		s += p.Label()
	}
	return s
}

// Phase starts phase name: it returns a context with the phase deadline and a Span to end it.
// On a cluster's timeline (OnTimeline) it is that cluster's phase of the name, if the budget
// has one. When no time is left it records the phase as declined and returns an
// *ExhaustedError.
func (c *Clock) Phase(ctx context.Context, name string) (context.Context, *Span, error) {
	p, deadline, reserved, err := c.phaseDeadline(TimelineOf(ctx), name)
	if err != nil {
		return ctx, nil, err
	}
	now := c.now()
	if !deadline.After(now) {
		e := &ExhaustedError{Phase: p.Label(), Deadline: deadline, Now: now, Reserved: reserved}
		c.Decline("phase "+p.Label(), e.Error())
		c.record(PhaseTiming{Name: name, Cluster: p.Cluster, Ceiling: p.Ceiling.D(), Start: now, End: now, Outcome: OutcomeDeclined, Error: e.Error()})
		return ctx, nil, e
	}
	pctx, cancel := context.WithDeadline(context.WithValue(ctx, phaseKey{}, name), deadline)
	if c.observer != nil {
		c.observer.PhaseStarted(p.Label(), now, deadline, p.Ceiling.D())
	}
	return pctx, &Span{clock: c, name: name, cluster: p.Cluster, ceiling: p.Ceiling.D(), start: now, deadline: deadline, cancel: cancel}, nil
}

type phaseKey struct{}

// PhaseName is the lane phase ctx belongs to (the one Phase started), "" outside any. Library
// code names the phase of its errors from it, and never spells a phase itself.
func PhaseName(ctx context.Context) string {
	name, _ := ctx.Value(phaseKey{}).(string)
	return name
}

// Timeout is a named wait inside a phase, as the lane file gives it; it never exceeds the ceiling.
func (c *Clock) Timeout(phase, name string) (time.Duration, error) {
	p, ok := c.budget.Phase(phase)
	if !ok {
		return 0, &UnknownPhaseError{Phase: phase, Known: c.phaseNames()}
	}
	t, ok := p.Timeouts[name]
	if !ok {
		return 0, fmt.Errorf("phase %s has no timeout %q in the lane file (budget.phases[].timeouts)", phase, name)
	}
	return t.D(), nil
}

// Diagnostics returns ctx bounded by the root deadline, for the on-failure collectors, and the
// time they have. Collectors that cannot finish inside it decline (see Decline).
func (c *Clock) Diagnostics(ctx context.Context) (context.Context, context.CancelFunc, time.Duration) {
	dctx, cancel := context.WithDeadline(ctx, c.root)
	return dctx, cancel, c.root.Sub(c.now())
}

// Decline records that something was not started for lack of time, so it is never silently dropped.
func (c *Clock) Decline(what, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.declined = append(c.declined, Declined{What: what, Reason: reason, At: c.now()})
}

// Mark records something that happened under the run (Mark); its At is now when zero.
func (c *Clock) Mark(m Mark) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.At.IsZero() {
		m.At = c.now()
	}
	c.marks = append(c.marks, m)
}

// Skip records that phase name was not run, and why (E2E_FROM_PHASE started the run later in
// the plan, or the substrate has nothing to do in it).
func (c *Clock) Skip(name, reason string) error {
	p, ok := c.budget.Phase(name)
	if !ok {
		return &UnknownPhaseError{Phase: name, Known: c.phaseNames()}
	}
	now := c.now()
	c.record(PhaseTiming{Name: name, Ceiling: p.Ceiling.D(), Start: now, End: now, Outcome: OutcomeSkipped, Note: reason})
	return nil
}

// RecordStage records how long a pool spent reaching a join stage.
func (c *Clock) RecordStage(pool, stage string, start, end time.Time) {
	s := StageTiming{Pool: pool, Stage: stage, Start: start, End: end, Spent: Seconds(end.Sub(start))}
	c.mu.Lock()
	c.stages = append(c.stages, s)
	c.mu.Unlock()
	if c.observer != nil {
		c.observer.StagePassed(s)
	}
}

func (c *Clock) record(p PhaseTiming) {
	p.Spent = Seconds(p.End.Sub(p.Start))
	p.Planned = Seconds(p.Ceiling)
	c.mu.Lock()
	c.phases = append(c.phases, p)
	c.mu.Unlock()
	if c.observer != nil {
		c.observer.PhaseEnded(p)
	}
}

// Span is one running phase.
type Span struct {
	clock    *Clock
	name     string
	cluster  string // the cluster whose own phase it is, "" for a shared one
	ceiling  time.Duration
	start    time.Time
	deadline time.Time
	cancel   context.CancelFunc
	once     sync.Once
	mu       sync.Mutex
	notes    []string
}

// Note adds a fact about the phase that the run's summary shows beside its outcome (install
// remediations that were reported, not failed on).
func (s *Span) Note(note string) {
	s.mu.Lock()
	s.notes = append(s.notes, note)
	s.mu.Unlock()
}

// Deadline is when the phase must end.
func (s *Span) Deadline() time.Time { return s.deadline }

// Name is the phase name.
func (s *Span) Name() string { return s.name }

// Start is when the phase started.
func (s *Span) Start() time.Time { return s.start }

// End records the phase with its outcome: ok when err is nil, deadline when it ran out of time,
// failed otherwise. It releases the phase context. Calling it again does nothing.
func (s *Span) End(err error) {
	s.once.Do(func() {
		s.cancel()
		now := s.clock.now()
		t := PhaseTiming{Name: s.name, Cluster: s.cluster, Ceiling: s.ceiling, Start: s.start, End: now, Deadline: s.deadline, Outcome: OutcomeOK}
		s.mu.Lock()
		t.Note = strings.Join(s.notes, "; ")
		s.mu.Unlock()
		if err != nil {
			t.Error = err.Error()
			t.Outcome = OutcomeFailed
			if !now.Before(s.deadline) {
				t.Outcome = OutcomeDeadline
			}
		}
		s.clock.record(t)
	})
}
