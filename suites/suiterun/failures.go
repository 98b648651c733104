package suiterun

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Failures turns failed specs into verdict.Failure records. A spec that fails on a typed
// error notes it first (Note), so its record carries the error's class and stage rather than
// a guess from its text; any other failure is judged from the phase the spec ran in (a phase
// whose time had run out makes it a deadline) or is a product assertion. Every record is kept
// by spec and pool, never by its message: two pools stuck at the same stage with the same
// words keep their own failures and evidence. Safe for concurrent use.
type Failures struct {
	mu       sync.Mutex
	noted    map[string][]noted      // by spec (full text)
	within   map[string]phaseContext // by spec: the phase its steps ran in
	evidence map[string][]string     // by spec
	list     []verdict.Failure
	// Decided, when set, hears each failure as soon as it is decided (a person's console).
	Decided func(verdict.Failure)
}

type noted struct {
	pool string
	err  error
	at   time.Time
}

type phaseContext struct {
	phase string
	ctx   context.Context
}

// NewFailures is an empty record.
func NewFailures() *Failures {
	return &Failures{noted: map[string][]noted{}, within: map[string]phaseContext{}, evidence: map[string][]string{}}
}

// Note remembers err, about pool, as the cause of spec's failure, decided now.
func (f *Failures) Note(spec, pool string, err error) {
	f.mu.Lock()
	f.noted[spec] = append(f.noted[spec], noted{pool: pool, err: err, at: time.Now()})
	f.mu.Unlock()
	j := classify(err)
	f.decided(verdict.Failure{Spec: spec, Pool: pool, Class: j.Class, Stage: j.Stage, Message: err.Error(), At: time.Now()})
}

func (f *Failures) decided(v verdict.Failure) {
	if f.Decided != nil {
		f.Decided(v)
	}
}

// Within records that spec's steps run inside lane phase phase, bounded by ctx: a failure of
// the spec that no typed error explains is a deadline at that phase when ctx's time ran out.
func (f *Failures) Within(spec, phase string, ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.within[spec] = phaseContext{phase: phase, ctx: ctx}
}

// AddEvidence attaches artifact paths (relative to the artifacts folder) to spec's failure.
func (f *Failures) AddEvidence(spec string, paths []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evidence[spec] = append(f.evidence[spec], paths...)
}

// Add records a failure that is not a spec's (a teardown leak).
func (f *Failures) Add(v verdict.Failure) {
	f.add(v)
	f.decided(v)
}

func (f *Failures) add(v verdict.Failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v.At.IsZero() {
		v.At = time.Now()
	}
	f.list = append(f.list, v)
}

// All is every failure recorded so far.
func (f *Failures) All() []verdict.Failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]verdict.Failure(nil), f.list...)
}

// Judge is what a failed spec becomes, before its evidence: its class, stage and pool.
func (f *Failures) Judge(r types.SpecReport) verdict.Failure {
	spec := r.FullText()
	f.mu.Lock()
	n, ok := pick(f.noted[spec], r.Failure.Message)
	pc, bounded := f.within[spec]
	f.mu.Unlock()
	v := verdict.Failure{Spec: spec, Pool: PoolOf(r), Message: r.Failure.Message, At: r.EndTime}
	c := verdict.Cause{Ended: verdict.Ending(r.State.String())}
	if ok {
		c.Err = n.err
		if r.State != types.SpecStateInterrupted {
			v.At = n.at
			if n.pool != "" {
				v.Pool = n.pool
			}
		}
	}
	if bounded && ranOut(pc.ctx) {
		c.Phase = pc.phase
		c.PhaseRanOut, _ = pc.ctx.Deadline()
	}
	j := verdict.Judge(c)
	v.Class, v.Stage, v.Evidence = j.Class, j.Stage, j.Evidence
	if !j.At.IsZero() {
		v.At = j.At // decided by the wait itself, maybe before the spec reported it
	}
	if v.Message == "" {
		v.Message = r.State.String()
	}
	return v
}

// pick is the note whose error the spec failed with, else the first note of the spec.
func pick(notes []noted, message string) (noted, bool) {
	for _, n := range notes {
		if n.err.Error() == message {
			return n, true
		}
	}
	if len(notes) > 0 {
		return notes[0], true
	}
	return noted{}, false
}

// ranOut reports whether ctx ended because its deadline passed.
func ranOut(ctx context.Context) bool {
	return ctx != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// Spec records the failure of a finished spec (ReportAfterEach); a spec that passed or was
// skipped records nothing.
func (f *Failures) Spec(r types.SpecReport) {
	if !r.State.Is(types.SpecStateFailureStates) {
		return
	}
	v := f.Judge(r)
	f.mu.Lock()
	v.Evidence = append(v.Evidence, f.evidence[v.Spec]...)
	wasNoted := len(f.noted[v.Spec]) > 0
	f.mu.Unlock()
	f.add(v)
	if !wasNoted {
		f.decided(v) // a noted failure was told when it was decided
	}
}

// classify is the class, stage and evidence an error carries (verdict.Judge).
func classify(err error) verdict.Judgement {
	return verdict.Judge(verdict.Cause{Err: err})
}

// PoolOf is the pool a spec reported with AddReportEntry(PoolEntry, name), or "".
func PoolOf(r types.SpecReport) string {
	for _, e := range r.ReportEntries {
		if e.Name == PoolEntry {
			return strings.Trim(e.StringRepresentation(), `"`)
		}
	}
	return ""
}
