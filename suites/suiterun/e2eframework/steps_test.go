package e2eframework

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/testbed"
)

// childEnv names the file the child process writes what it recorded into.
const childEnv = "E2EFRAMEWORK_STEPS_CHILD"

type recorded struct {
	Steps  []recordedStep `json:"steps"`
	Stages []string       `json:"stages"`
}

type recordedStep struct {
	Name    string `json:"name"`
	Failed  bool   `json:"failed"`
	Skipped bool   `json:"skipped"`
	Err     string `json:"err"`
	Why     string `json:"why"`
}

// A feature run by e2e-framework, its steps watched as Specs watches them: each step that passed
// is a stage passed, in order; a step that failed with Fail keeps its words, one that panicked
// is a failure with the panic (the process goes on), one that skipped itself is skipped; after a
// step that stopped (Fail), no assessment runs and the teardown does. The feature fails, so it
// runs in a child process (this test's binary again), whose failure is the point.
func TestAFeaturesStepsAreWatched(t *testing.T) {
	if out := os.Getenv(childEnv); out != "" {
		child(t, out)
		return
	}
	out := filepath.Join(t.TempDir(), "recorded.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestAFeaturesStepsAreWatched$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+out)
	log, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child's feature passed; it must fail:\n%s", log)
	}
	data, rerr := os.ReadFile(out)
	if rerr != nil {
		t.Fatalf("the child recorded nothing (%v): %v\n%s", err, rerr, log)
	}
	var got recorded
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := []recordedStep{
		{Name: "workers"},
		{Name: "passes"},
		{Name: "skips", Skipped: true},
		{Name: "panics", Failed: true, Why: "step panics panicked: boom"},
		{Name: "says-why", Failed: true, Err: "Node w1 is not found by kubernetes.io/hostname=w1"},
		{Name: "cleans-up"},
	}
	if len(got.Steps) != len(want) {
		t.Fatalf("steps %+v, want %+v", got.Steps, want)
	}
	for i := range want {
		if got.Steps[i] != want[i] {
			t.Errorf("step %d: %+v, want %+v", i, got.Steps[i], want[i])
		}
	}
	if strings.Join(got.Stages, ",") != "workers,passes,cleans-up" {
		t.Errorf("stages passed: %v, want workers, passes, cleans-up", got.Stages)
	}
	for _, w := range []string{"Node w1 is not found by kubernetes.io/hostname=w1", "step panics panicked: boom", "--- FAIL: TestAFeaturesStepsAreWatched/md0/hostnames/says-why"} {
		if !strings.Contains(string(log), w) {
			t.Errorf("the child's output lacks %q:\n%s", w, log)
		}
	}
}

// child runs the feature and writes what its steps recorded to out.
func child(t *testing.T, out string) {
	var stages []string
	steps := &outcomes{ctx: context.Background(), stages: &testbed.Stages{Pool: "md0",
		OnProgress: func(p join.Progress) { stages = append(stages, string(p.Stage)) }}}
	pool := join.Pool{Spec: lane.Pool{Name: "md0"}}
	ctx := context.WithValue(context.Background(), key{}, &value{pool: pool, steps: steps})
	e, err := env.NewWithContext(ctx, envconf.New())
	if err != nil {
		t.Fatal(err)
	}
	ok := func(ctx context.Context, _ *testing.T, _ *envconf.Config) context.Context { return ctx }
	f := features.New("hostnames").
		WithSetup("workers", ok).
		Assess("passes", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if p, _, found := Pool(ctx); !found || p.Name() != "md0" {
				t.Errorf("Pool(ctx): %v %v, want md0", p.Name(), found)
			}
			return ctx
		}).
		Assess("skips", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			t.Skip("no instance-type label to judge")
			return ctx
		}).
		Assess("panics", func(ctx context.Context, _ *testing.T, _ *envconf.Config) context.Context { panic("boom") }).
		Assess("says-why", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			Fail(ctx, t, errors.New("Node w1 is not found by kubernetes.io/hostname=w1"))
			return ctx
		}).
		Assess("never", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			t.Error("an assessment ran after one that stopped")
			return ctx
		}).
		WithTeardown("cleans-up", ok).
		Feature()
	t.Run("md0", func(t *testing.T) { e.Test(t, feature{f, steps}) })
	var r recorded
	for _, o := range steps.list {
		s := recordedStep{Name: o.name, Failed: o.failed, Skipped: o.skipped, Why: o.why}
		if o.err != nil {
			s.Err = o.err.Error()
		}
		r.Steps = append(r.Steps, s)
	}
	r.Stages = stages
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
