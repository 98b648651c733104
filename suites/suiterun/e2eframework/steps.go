package e2eframework

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/testbed"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// feature is a feature whose steps are watched (step): e2e-framework runs it as it runs f.
type feature struct {
	types.Feature
	steps *outcomes
}

func (f feature) Steps() []types.Step {
	var out []types.Step
	for i, s := range f.Feature.Steps() {
		out = append(out, step{Step: s, name: stepName(s, i), steps: f.steps})
	}
	return out
}

// stepName is a step's name, as e2e-framework names an unnamed one (Assessment-<n>, counted
// among the feature's steps here).
func stepName(s types.Step, i int) string {
	if s.Name() != "" {
		return s.Name()
	}
	return fmt.Sprintf("step-%d", i+1)
}

// step runs a feature's step and records how it ended: passed (a stage of the pool, now),
// failed (and why, when the step said so with Fail), skipped, or panicked (a failure, with the
// panic and its stack in the test's output, instead of the suite's process crashing).
type step struct {
	types.Step
	name  string
	steps *outcomes
}

func (s step) Func() types.StepFunc {
	inner := s.Step.Func()
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) (out context.Context) {
		o := s.steps.begin(s.name, t.Failed())
		out = ctx
		defer func() {
			if p := recover(); p != nil {
				o.why = fmt.Sprintf("step %s panicked: %v", s.name, p)
				t.Errorf("%s\n%s", o.why, debug.Stack())
			}
			s.steps.end(o, t)
		}()
		return inner(ctx, t, cfg)
	}
}

// outcome is how one step ended.
type outcome struct {
	name        string
	failedAtRun bool // the test had failed before the step began (a teardown after a failed assessment)
	done        bool
	failed      bool
	skipped     bool
	err         error  // what the step gave Fail
	why         string // a panic
}

// outcomes are a feature's steps as they ran on one pool.
type outcomes struct {
	stages *testbed.Stages
	ctx    context.Context

	mu   sync.Mutex
	list []*outcome
}

func (os *outcomes) begin(name string, failed bool) *outcome {
	os.mu.Lock()
	defer os.mu.Unlock()
	o := &outcome{name: name, failedAtRun: failed}
	os.list = append(os.list, o)
	return o
}

// because records err as why the step running now fails.
func (os *outcomes) because(err error) {
	os.mu.Lock()
	defer os.mu.Unlock()
	if n := len(os.list); n > 0 && os.list[n-1].err == nil {
		os.list[n-1].err = err
	}
}

// end records how o ended; a step that passed is a stage of the pool, passed now.
func (os *outcomes) end(o *outcome, t *testing.T) {
	os.mu.Lock()
	o.done = true
	o.skipped = t.Skipped()
	o.failed = t.Failed() && !o.failedAtRun || o.why != "" || o.err != nil
	passed := !o.failed && !o.skipped
	os.mu.Unlock()
	if passed {
		os.stages.Pass(os.ctx, join.Stage(o.name), "step "+o.name+" passed")
	}
}

// judge turns the feature's run into the spec's outcome: each skipped assessment a skipped
// check, then the first failed step a failure at its stage; a feature e2e-framework failed
// outside any step (passed false) fails at stage feature.
func (os *outcomes) judge(r *suiterun.Step, w *suiterun.World, name string, passed bool) {
	os.mu.Lock()
	list := append([]*outcome(nil), os.list...)
	os.mu.Unlock()
	output := "suites/" + w.Name + "/output.log"
	for _, o := range list {
		if o.skipped && !o.failed {
			r.SkipCheck(o.name, fmt.Sprintf("feature %q: step %s skipped itself (t.Skip; its words are in %s)", name, o.name, output))
		}
	}
	for _, o := range list {
		if !o.failed {
			continue
		}
		spec := ginkgoSpec()
		w.Failures.AddEvidence(spec, []string{output})
		if o.err != nil {
			if _, typed := verdict.Carried(o.err); typed {
				r.Must(o.err)
			}
			r.Must(r.Stages.Fail(join.Stage(o.name), verdict.ProductAssertion, fmt.Sprintf("feature %q: %v", name, o.err)))
		}
		why := o.why
		if why == "" {
			why = fmt.Sprintf("step %s failed (what it said with t.Error or t.Fatal is in %s)", o.name, output)
		}
		r.Must(r.Stages.Fail(join.Stage(o.name), verdict.ProductAssertion, fmt.Sprintf("feature %q: %s", name, why)))
	}
	if !passed {
		w.Failures.AddEvidence(ginkgoSpec(), []string{output})
		r.Must(r.Stages.Fail("feature", verdict.ProductAssertion, fmt.Sprintf("feature %q failed outside its steps (see %s)", name, output)))
	}
}

// ginkgoSpec is the full text of the spec running now.
func ginkgoSpec() string { return ginkgo.CurrentSpecReport().FullText() }
