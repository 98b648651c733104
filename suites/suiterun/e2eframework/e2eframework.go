// Package e2eframework runs features written with sigs.k8s.io/e2e-framework
// (features.New(...).Assess(...).Feature()) as specs of a suite, against each pool's tenant
// cluster, inside a lane phase, with their results in the run's verdict and reports like any
// spec's.
//
// A feature runs only through e2e-framework's Environment.Test(t *testing.T, ...), which runs it
// as a Go subtest and each of its assessments as a subtest of that (sigs.k8s.io/e2e-framework
// v0.7.0 pkg/env/env.go:225-242, 484-548); a Ginkgo node has no *testing.T of its own. So Specs
// registers one Ginkgo spec per pool for the feature, and that spec runs the feature as a
// subtest of the suite's own Go test (suiterun.World.T), from the spec's goroutine, while the
// suite's Ginkgo specs run: the tenant's bring-up, evidence, keep and teardown stay suiterun.Run's,
// the feature runs inside the phase's time, and its outcome becomes the spec's. Each step passed
// is a stage of the pool (a console line, a segment of its row in the timeline, an entry of
// timings.json); the first step that failed fails the spec at that stage, class
// product-assertion (or the class and stage of the typed error given to Fail); an assessment
// that skipped itself is a skipped check (suiterun.SkipCheck).
//
// A feature's steps find their pool with Pool(ctx) and the tenant cluster through the
// envconf.Config they are given: its Client() and its KubeconfigFile() are the pool's tenant
// cluster's. examples/hostnames is a suite of one feature; docs/writing-a-suite.md walks
// through it.
package e2eframework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/testbed"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// Specs registers feature f on every pool of the world's lane: a spec named "pool <pool>
// feature <f's name>" that runs f against the pool's tenant cluster in lane phase phase, entered
// once per pool (declare it perPool in suite.yaml). A phase holds one feature: the budget counts
// its ceiling once per pool, so a second feature needs a phase of its own; a second feature
// given the same phase fails its specs, class configuration, naming both.
func Specs(w *suiterun.World, phase string, f types.Feature) {
	name := f.Name()
	clash := claim(w, phase, name)
	for _, p := range w.Tenant.Pools {
		ginkgo.Describe("pool "+p.Name(), ginkgo.Label("pool:"+p.Name(), "feature:"+labelSafe.Replace(name)), func() {
			ginkgo.It("feature "+name, func(spec ginkgo.SpecContext) {
				if clash != "" {
					suiterun.Must(w.Failures, p.Name(), &testbed.ConfigurationError{File: w.Lane.File, Err: fmt.Errorf(
						"feature %q and feature %q both run in phase %s, whose ceiling the budget counts once per pool: give each a phase of its own", clash, name, phase)})
				}
				run(spec, w, phase, p, f)
			})
		})
	}
}

// labelSafe replaces, in a feature's name, the characters a Ginkgo label may not hold (those of
// its filter language, github.com/onsi/ginkgo/v2 v2.34.0 types/label_filter.go:570).
var labelSafe = strings.NewReplacer("&", "-", "|", "-", "!", "-", ",", "-", "(", "-", ")", "-", "/", "-")

var (
	claimsMu sync.Mutex
	claims   = map[*suiterun.World]map[string]string{}
)

// claim records that feature runs in phase, and returns the feature that had it already ("").
func claim(w *suiterun.World, phase, feature string) string {
	claimsMu.Lock()
	defer claimsMu.Unlock()
	if claims[w] == nil {
		claims[w] = map[string]string{}
	}
	if had, ok := claims[w][phase]; ok && had != feature {
		return had
	}
	claims[w][phase] = feature
	return ""
}

// run runs feature f on pool p, as the spec running now.
func run(spec ginkgo.SpecContext, w *suiterun.World, phase string, p join.Pool, f types.Feature) {
	rec, r := w.InPhaseOn(phase, p).OnPool(spec, phase, p)
	t := w.T()
	if t == nil {
		r.Must(errors.New("no Go test to run the feature in: register it inside suiterun.Run's Config.Specs"))
	}
	cfg, err := config(w, p)
	r.Must(err)
	steps := &outcomes{stages: r.Stages, ctx: r.Ctx}
	ctx := context.WithValue(r.Ctx, key{}, &value{pool: p, record: rec, steps: steps})
	e, err := env.NewWithContext(ctx, cfg)
	r.Must(err)
	passed := t.Run(p.Name(), func(t *testing.T) { e.Test(t, feature{f, steps}) })
	steps.judge(r, w, f.Name(), passed)
}

// config is the envconf.Config a feature on pool p is given: its client and its kubeconfig
// file are the pool's tenant cluster's (the file in the suite's private folder, never the
// artifacts: it holds a credential).
func config(w *suiterun.World, p join.Pool) (*envconf.Config, error) {
	c := p.Kubernetes()
	if c == nil || c.REST == nil {
		return nil, fmt.Errorf("pool %s: its tenant cluster is not reachable (its control plane never came up)", p.Name())
	}
	kl, err := klient.New(c.REST)
	if err != nil {
		return nil, fmt.Errorf("pool %s: a client of its tenant cluster: %w", p.Name(), err)
	}
	cfg := envconf.New().WithClient(kl)
	path, err := w.KeptKubeconfig("tenant-"+p.Names.Cluster(), c)
	if err != nil {
		return nil, err
	}
	if path != "" {
		cfg.WithKubeconfigFile(path)
	}
	return cfg, nil
}

type key struct{}

type value struct {
	pool   join.Pool
	record *join.Record
	steps  *outcomes
}

// Pool is the pool a feature runs against, from the context its steps are given, and the
// pool's join record (its MachineDeployment, each Machine with its Node as they were right
// after the join); false outside a feature Specs runs.
func Pool(ctx context.Context) (join.Pool, *join.Record, bool) {
	v, ok := ctx.Value(key{}).(*value)
	if !ok {
		return join.Pool{}, nil, false
	}
	return v.pool, v.record, true
}

// Fail fails the step running with t and stops it (t.FailNow), saying why with err: the verdict
// carries err's words at the step's stage, or err's own class and stage when it is a typed
// error of the harness (a *join.StageError, a *tenant.WaitError). A step that fails with
// t.Error or t.Fatal fails the same stage; its words are then in the suite's output.log.
func Fail(ctx context.Context, t *testing.T, err error) {
	t.Helper()
	if v, ok := ctx.Value(key{}).(*value); ok {
		v.steps.because(err)
	}
	t.Fatal(err)
}
