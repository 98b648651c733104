package suiterun

import (
	"context"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/cozy-e2e/framework/testbed"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// PoolEntry is the report entry naming the pool a spec is about.
const PoolEntry = "pool"

// Must fails the current spec with err when it is not nil, noting it first (f may be nil),
// so its failure record carries err's class, stage and the moment it was decided.
func Must(f *Failures, pool string, err error) {
	if err == nil {
		return
	}
	if f != nil {
		f.Note(CurrentSpecReport().FullText(), pool, err)
	}
	Fail(err.Error(), 1)
}

// MustIn is Must for a step of lane phase phase: an API call that ran out of the phase's time
// is a deadline at that phase, not a product assertion.
func MustIn(f *Failures, phase, pool string, err error) {
	Must(f, pool, testbed.InPhase(phase, pool, err))
}

// Within bounds the current spec's assertions by ctx, the context of phase.
func Within(f *Failures, phase string, ctx context.Context) {
	if f != nil {
		f.Within(CurrentSpecReport().FullText(), phase, ctx)
	}
}

// SkipCheck records that one check of the current spec, about pool ("" for none), could not be
// judged and is skipped for reason; the spec goes on with its other checks and its result is
// theirs. The check shows as skipped, with its reason, in the run's verdict.json, junit.xml (a
// skipped testcase beside the spec's), summary.md and report.html (verdict.Skip). A spec that
// can judge nothing at all skips itself instead (Ginkgo's Skip).
func SkipCheck(pool, check, reason string) {
	AddReportEntry(verdict.SkipEntry, verdict.Skip{Spec: CurrentSpecReport().FullText(), Pool: pool, Check: check, Reason: reason})
}
