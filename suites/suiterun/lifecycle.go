package suiterun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/testbed"
)

// Stage is one stage of a spec, recorded and reported as a join's are (join.Stage): a suite
// names its own spec's stages with it (const StageLabelled suiterun.Stage = "labelled").
type Stage = join.Stage

// Lifecycle is what every lifecycle spec acts with: the testbed's tenant and the pools' joins
// (a lifecycle spec acts on a pool after its join spec passed), the clock its phase runs on,
// where failures are noted and who hears its stages.
type Lifecycle struct {
	Tenant   *testbed.Tenant
	Pools    *testbed.Pools
	Clock    *budget.Clock
	Failures *Failures
	// OnProgress hears each change of a spec's stage or of what it waits for; nil: none.
	OnProgress func(join.Progress)
	// Log receives lines for people (what the spec did and how long it took); nil: none.
	Log io.Writer
	// Before runs first, with the spec's context: the suite ends the pools phase there once
	// every join ended on its own (World.EndPools), so a spec placed between join specs
	// stops no join; nil: nothing.
	Before func(context.Context)
	// Timeline is the conformance cluster timeline the spec's phase runs on (budget.OnTimeline,
	// lane.Phase.Cluster); "": the budget finds the phase by its name.
	Timeline string
}

// Step is one spec running in a lane phase of its own (Lifecycle.Start, Lifecycle.OnPool): the
// phase's context, the spec's stages, and where its failures are noted.
type Step struct {
	// Ctx is the phase's context: its deadline bounds the spec's steps, and the spec's own
	// interruption ends it.
	Ctx context.Context
	// Stages records the spec's stages as the join's are recorded: a console line each, a row
	// segment in the summary's timeline, an entry of timings.json.
	Stages *testbed.Stages

	lc    Lifecycle
	phase string
	pool  string
	span  *budget.Span
}

// Start begins a spec in lane phase phase, about pool ("" for a spec of the whole tenant,
// reported under row): it runs Before, starts the phase and the stages' clock, and ends the
// phase when the spec ends, with the spec's failure. A spec may enter a phase more than once
// (once per pool): each entry gets the phase's ceiling, and lanes-check counts it as often
// (lane.PhaseNeed.PerPool).
func (lc Lifecycle) Start(spec context.Context, phase, pool, row string) *Step {
	if lc.Before != nil {
		lc.Before(spec)
	}
	r := &Step{lc: lc, phase: phase, pool: pool}
	pctx, span, err := lc.Clock.Phase(budget.OnTimeline(context.WithoutCancel(spec), lc.Timeline), phase)
	Must(lc.Failures, pool, err)
	r.span = span
	var cancel context.CancelFunc
	r.Ctx, cancel = context.WithCancel(pctx)
	stop := context.AfterFunc(spec, cancel)
	Within(lc.Failures, phase, r.Ctx)
	DeferCleanup(func() {
		stop()
		cancel()
		var failed error
		if rep := CurrentSpecReport(); rep.Failed() {
			failed = errors.New(rep.Failure.Message)
		}
		r.span.End(failed)
	})
	r.Stages = &testbed.Stages{Pool: row, Clock: lc.Clock, OnProgress: lc.OnProgress, Log: nil}
	r.Stages.Start(r.Ctx)
	return r
}

// Must fails the spec on err, noted as the pool's; an API call cut short by the phase's
// deadline is a deadline at the phase.
func (r *Step) Must(err error) { MustIn(r.lc.Failures, r.phase, r.pool, err) }

// SkipCheck records that one check of the spec, on the step's pool, could not be judged and is
// skipped for reason (SkipCheck); the spec goes on with its other checks, and a line says so.
func (r *Step) SkipCheck(check, reason string) {
	SkipCheck(r.pool, check, reason)
	r.Logf("pool %s: check %s skipped: %s", r.pool, check, reason)
}

// Logf writes a line for people (Lifecycle.Log).
func (r *Step) Logf(format string, a ...any) {
	if r.lc.Log != nil {
		fmt.Fprintf(r.lc.Log, format+"\n", a...)
	}
}

// OnPool begins a spec on pool p in phase: it names the pool in the spec's report, takes the
// pool's record from its join (the spec is skipped when the pool did not join) and starts the
// phase (Start).
func (lc Lifecycle) OnPool(spec context.Context, phase string, p join.Pool) (*join.Record, *Step) {
	AddReportEntry(PoolEntry, p.Name())
	rec := joined(spec, lc, p)
	return rec, lc.Start(spec, phase, p.Name(), p.Name())
}

// joined is the pool's record from its join spec; the spec is skipped when the pool did not
// join (its join spec failed, and says why).
func joined(spec context.Context, lc Lifecycle, p join.Pool) *join.Record {
	rec, err := lc.Pools.Await(spec, p.Name())
	if err != nil || rec == nil {
		Skip(fmt.Sprintf("pool %s did not join, so nothing of its lifecycle can be judged: %v", p.Name(), err))
	}
	return rec
}

// rejoined follows pool p until replicas workers run a workload pod again, with a join of its
// own (its join stages are not recorded again: the spec's stages say where it was), and
// returns the pool's record; a join that fails fails the spec, noted as the pool's.
func (r *Step) rejoined(ctx context.Context, p join.Pool, replicas int) *join.Record {
	t := r.lc.Tenant
	o := t.Options()
	hub := t.Consoles()
	w, err := join.Start(ctx, join.Options{Management: o.Management, Tenant: p.Kubernetes(), Namespace: p.Names.Namespace,
		OSes: []osfamily.Family{p.OS}, OnProgress: o.OnProgress, Consoles: hub, Platform: o.Platform,
		WorkloadImage: o.Lane.Workload.Ref()})
	r.Must(err)
	defer w.Close()
	p.Spec.Replicas = replicas
	res, err := w.Join(ctx, p)
	r.Must(err)
	rec, err := join.Inspect(ctx, join.InspectOptions{Management: o.Management, Tenant: p.Kubernetes()}, p, res)
	r.Must(err)
	return rec
}

// since formats a duration for people.
func since(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// PoolFor is the pool a lifecycle spec acts on: the one the lane gives it (pools[].lifecycle),
// else by the spec's own rule: remediation and rollout take the pool with the most workers
// (a pool of several remediates at the chart's maxUnhealthy and rolls with a worker to spare),
// scaling the first pool of one worker; the first pool when none fits.
func PoolFor(pools []join.Pool, spec string) join.Pool {
	return pools[poolFor(len(pools), spec, func(i int) (string, int) { return pools[i].Spec.Lifecycle, pools[i].Spec.Replicas })]
}

// LanePoolFor is the index of the lane pool PoolFor picks for spec, before any pool exists.
func LanePoolFor(pools []lane.Pool, spec string) int {
	return poolFor(len(pools), spec, func(i int) (string, int) { return pools[i].Lifecycle, pools[i].Replicas })
}

// poolFor is PoolFor's rule over n pools, each read by of.
func poolFor(n int, spec string, of func(i int) (lifecycle string, replicas int)) int {
	for i := range n {
		if l, _ := of(i); l == spec {
			return i
		}
	}
	best := 0
	for i := range n {
		_, r := of(i)
		_, b := of(best)
		switch spec {
		case PhaseScaling:
			if r == 1 && b != 1 {
				best = i
			}
		default:
			if r > b {
				best = i
			}
		}
	}
	return best
}

// ScaleTo is the size the scaling spec grows pool p to (ScaleSize).
func ScaleTo(p join.Pool) int { return ScaleSize(p.Spec.Replicas) }

// ScaleSize is the size the scaling spec grows a pool of replicas workers to: 3, or two more
// than it has.
func ScaleSize(replicas int) int { return max(3, replicas+2) }
