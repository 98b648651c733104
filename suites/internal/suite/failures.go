package suite

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// PoolEntry is the report entry naming the pool a spec is about.
const PoolEntry = "pool"

// Failures turns failed specs into verdict.Failure records. A spec that fails on a typed
// error notes it first (Note), so its record carries the error's class and stage rather than
// a guess from its text; any other failure is a product assertion. Safe for concurrent use.
type Failures struct {
	mu       sync.Mutex
	noted    map[string]noted // by failure message
	evidence map[string][]string
	list     []verdict.Failure
	// Decided, when set, hears each failure as soon as it is decided (a person's console).
	Decided func(verdict.Failure)
}

type noted struct {
	pool string
	err  error
	at   time.Time
}

// NewFailures is an empty record.
func NewFailures() *Failures {
	return &Failures{noted: map[string]noted{}, evidence: map[string][]string{}}
}

// Note remembers err, about pool, as the cause of the spec failure whose message is
// err.Error(), decided now.
func (f *Failures) Note(pool string, err error) {
	f.mu.Lock()
	f.noted[err.Error()] = noted{pool: pool, err: err, at: time.Now()}
	f.mu.Unlock()
	j := classify(err)
	f.decided(verdict.Failure{Pool: pool, Class: j.class, Stage: j.stage, Message: err.Error(), At: time.Now()})
}

func (f *Failures) decided(v verdict.Failure) {
	if f.Decided != nil {
		f.Decided(v)
	}
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
	f.mu.Lock()
	n, ok := f.noted[r.Failure.Message]
	f.mu.Unlock()
	v := verdict.Failure{Spec: r.FullText(), Pool: PoolOf(r), Message: r.Failure.Message, At: r.EndTime}
	switch {
	case ok:
		j := classify(n.err)
		v.Class, v.Stage, v.Evidence, v.At = j.class, j.stage, j.evidence, n.at
		if !j.at.IsZero() {
			v.At = j.at // decided by the wait itself, maybe before the spec reported it
		}
		if n.pool != "" {
			v.Pool = n.pool
		}
	case r.State == types.SpecStatePanicked:
		v.Class = verdict.Harness
	case r.State == types.SpecStateTimedout || r.State == types.SpecStateInterrupted || r.State == types.SpecStateAborted:
		v.Class = verdict.Deadline
		v.Stage = "spec " + r.State.String()
	default:
		v.Class = verdict.ProductAssertion
	}
	if v.Message == "" {
		v.Message = r.State.String()
	}
	return v
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
	_, wasNoted := f.noted[r.Failure.Message]
	f.mu.Unlock()
	f.add(v)
	if !wasNoted {
		f.decided(v) // a noted failure was told when it was decided
	}
}

// judged is what classify finds in an error, with when it was decided (zero: unknown).
type judged struct {
	class    verdict.Class
	stage    string
	evidence []string
	at       time.Time
}

// classify is the class, stage and evidence of an error: a join.StageError's own; a
// tenant.WaitError's class and phase; an exhausted budget or a DeadlineError a deadline at
// its phase; anything else a product assertion.
func classify(err error) judged {
	var se *join.StageError
	var we *tenant.WaitError
	var ex *budget.ExhaustedError
	var de *DeadlineError
	switch {
	case errors.As(err, &se):
		return judged{se.Class, string(se.Stage), se.Evidence, se.At}
	case errors.As(err, &we):
		return judged{we.Class, we.Phase, nil, we.At}
	case errors.As(err, &ex):
		return judged{verdict.Deadline, ex.Phase, nil, ex.Now}
	case errors.As(err, &de):
		return judged{verdict.Deadline, de.Phase, nil, time.Time{}}
	}
	return judged{verdict.ProductAssertion, "", nil, time.Time{}}
}

// typed reports whether err already carries a class (classify knows it).
func typed(err error) bool {
	var se *join.StageError
	var we *tenant.WaitError
	var ex *budget.ExhaustedError
	var de *DeadlineError
	return errors.As(err, &se) || errors.As(err, &we) || errors.As(err, &ex) || errors.As(err, &de)
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
