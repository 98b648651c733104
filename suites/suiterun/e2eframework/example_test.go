package e2eframework_test

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/cozystack/cozy-e2e/suites/suiterun"
	"github.com/cozystack/cozy-e2e/suites/suiterun/e2eframework"
)

// A suite whose check is an e2e-framework feature: the harness's join spec on every pool, then
// the feature on every pool in lane phase "workers" (declared perPool in the suite's
// suite.yaml). Each step gets the pool's tenant cluster in cfg (cfg.Client(),
// cfg.KubeconfigFile()) and the pool in its context (Pool); a step that passed is a stage of
// the pool, the first that failed fails the pool's spec at that stage. examples/hostnames is
// one, whole.
func ExampleSpecs() {
	workers := features.New("every worker has a Node").
		Assess("counted", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			p, rec, _ := e2eframework.Pool(ctx)
			if len(rec.Machines) != p.Spec.Replicas {
				e2eframework.Fail(ctx, t, fmt.Errorf("%d Machines of %d", len(rec.Machines), p.Spec.Replicas))
			}
			return ctx
		}).
		Feature()
	testSuite := func(t *testing.T) {
		suiterun.Run(t, suiterun.Config{Name: "workers", Specs: func(w *suiterun.World) {
			w.JoinSpecs(context.Background())
			e2eframework.Specs(w, "workers", workers)
		}})
	}
	_ = testSuite
}

// Outside a feature the harness runs, a context carries no pool.
func ExamplePool() {
	_, _, ok := e2eframework.Pool(context.Background())
	fmt.Println(ok)
	// Output: false
}
