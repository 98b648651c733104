package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Stages follows one lifecycle spec of a pool through its stages, as framework/join follows a
// join: each wait is watch-driven and ends early on a terminal state; each stage passed is
// recorded in the clock (timings.json, the summary, the console's "passed" lines); each
// change of what a stage waits for is reported (OnProgress); a wait that runs out of time or
// meets a terminal state is a *join.StageError naming the stage it could not pass, how long
// the pool stood there, and what it waited for.
type Stages struct {
	// Pool is the pool (or, for a spec about the whole tenant, the row it reports under).
	Pool  string
	Clock *budget.Clock
	// OnProgress hears each change of stage or detail; nil: none.
	OnProgress func(join.Progress)
	// Log receives one line per change, as the join's; nil: none.
	Log io.Writer

	once   sync.Once
	start  time.Time
	passed time.Time // when the last stage was passed
	budget time.Duration
}

func (s *Stages) begin(ctx context.Context) {
	s.once.Do(func() {
		s.start = time.Now()
		s.passed = s.start
		if dl, ok := ctx.Deadline(); ok {
			s.budget = dl.Sub(s.start)
		}
	})
}

// Start starts the stages' clock: the first stage is counted from now. Wait and Pass start it
// on their first call otherwise.
func (s *Stages) Start(ctx context.Context) { s.begin(ctx) }

// Bound sets the budget the stages' errors name (a spec bounded tighter than its phase: the
// timeouts it waits on plus a margin).
func (s *Stages) Bound(d time.Duration) { s.budget = d }

// Since is when the stages' clock started.
func (s *Stages) Since() time.Time { return s.start }

// Pass records stage as passed now (an action of the spec's own: the break, the change).
func (s *Stages) Pass(ctx context.Context, stage join.Stage, detail string) {
	s.begin(ctx)
	s.progress(stage, detail, s.passed)
	s.record(stage)
}

// Wait waits, inside ctx, until judge says stage is reached; it watches refs (in cl, or each
// ref's own cluster). A *tenant.Terminal from judge ends it at once with the terminal's class;
// ctx's end with class deadline.
func (s *Stages) Wait(ctx context.Context, cl *cluster.Cluster, stage join.Stage, what string, refs []tenant.Ref, judge tenant.Judge) error {
	s.begin(ctx)
	since := time.Now()
	last := ""
	err := tenant.Wait(ctx, cl, tenant.WaitOptions{Pool: s.Pool, What: what, Watch: refs, Judge: judge,
		OnDetail: func(d string) {
			last = d
			s.progress(stage, d, since)
		}})
	var we *tenant.WaitError
	switch {
	case err == nil:
		s.record(stage)
		return nil
	case errors.As(err, &we):
		d := we.Detail
		if d == "" {
			d = last
		}
		if we.Class == verdict.Deadline {
			d = what + ": " + d
		}
		return &join.StageError{Pool: s.Pool, Stage: stage, Class: we.Class, Detail: d,
			Elapsed: time.Since(since), Budget: s.budget, At: we.At}
	}
	return err
}

// Fail is a terminal state the spec saw itself at stage (outside a Wait).
func (s *Stages) Fail(stage join.Stage, class verdict.Class, detail string) *join.StageError {
	return &join.StageError{Pool: s.Pool, Stage: stage, Class: class, Detail: detail, Budget: s.budget, At: time.Now()}
}

func (s *Stages) record(stage join.Stage) {
	now := time.Now()
	if s.Clock != nil {
		s.Clock.RecordStage(s.Pool, string(stage), s.passed, now)
	}
	s.passed = now
}

func (s *Stages) progress(stage join.Stage, detail string, since time.Time) {
	if s.OnProgress != nil {
		s.OnProgress(join.Progress{Pool: s.Pool, Stage: stage, Detail: detail, Since: since})
	}
	if s.Log != nil {
		fmt.Fprintf(s.Log, "%s pool %s: %s: %s (at this stage %s)\n", time.Now().UTC().Format("15:04:05.000"), s.Pool, stage, detail,
			time.Since(since).Round(100*time.Millisecond))
	}
}
