package suiterun

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
)

// A pool of one at the chart's 50% is never remediated; at 100%, or with two workers, one is.
func TestRemediableFollowsClusterAPIsArithmetic(t *testing.T) {
	cases := []struct {
		max      string
		replicas int
		want     int
	}{{"50%", 1, 0}, {"50%", 2, 1}, {"100%", 1, 1}, {"0%", 5, 0}, {"1", 1, 1}, {"40%", 3, 1}}
	for _, c := range cases {
		got, err := remediable(c.max, c.replicas)
		if err != nil || got != c.want {
			t.Errorf("maxUnhealthy %s of %d: %d (%v), want %d", c.max, c.replicas, got, err, c.want)
		}
	}
	if _, err := remediable("half", 2); err == nil {
		t.Error("a maxUnhealthy that is neither a number nor a percentage was accepted")
	}
}

// The value a pool runs with comes from the pool, else the app, else the chart's default.
func TestMaxUnhealthyComesFromThePoolTheAppOrTheChart(t *testing.T) {
	app := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"nodeGroups": map[string]any{
		"a": map[string]any{"maxUnhealthy": "100%"}, "b": map[string]any{}}}}}
	if v, src := maxUnhealthyOf(app, "a"); v != "100%" || src != "nodeGroups.a.maxUnhealthy" {
		t.Errorf("pool's own: %s (%s)", v, src)
	}
	if v, src := maxUnhealthyOf(app, "b"); v != ChartMaxUnhealthy || src != "the chart's default nodeHealthCheck.maxUnhealthy" {
		t.Errorf("chart's: %s (%s)", v, src)
	}
	app.Object["spec"].(map[string]any)["nodeHealthCheck"] = map[string]any{"maxUnhealthy": int64(1)}
	if v, src := maxUnhealthyOf(app, "b"); v != "1" || src != "nodeHealthCheck.maxUnhealthy" {
		t.Errorf("app's: %s (%s)", v, src)
	}
}

func pool(name string, replicas int, lifecycle string) join.Pool {
	return join.Pool{Spec: lane.Pool{Name: name, Replicas: replicas, Lifecycle: lifecycle}}
}

// The lane's choice wins; otherwise remediation and rollout take the largest pool, scaling the
// first pool of one.
func TestEachLifecycleSpecFindsItsPool(t *testing.T) {
	pools := []join.Pool{pool("md0", 2, ""), pool("kairos", 1, ""), pool("big", 3, "")}
	for spec, want := range map[string]string{PhaseRemediation: "big", PhaseRollout: "big", PhaseScaling: "kairos"} {
		if got := PoolFor(pools, spec).Name(); got != want {
			t.Errorf("%s: %s, want %s", spec, got, want)
		}
	}
	pools[0].Spec.Lifecycle = PhaseScaling
	if got := PoolFor(pools, PhaseScaling).Name(); got != "md0" {
		t.Errorf("the lane gave scaling md0, the spec took %s", got)
	}
	if ScaleTo(pool("a", 1, "")) != 3 || ScaleTo(pool("a", 3, "")) != 5 {
		t.Error("ScaleTo: 1 grows to 3, 3 to 5")
	}
}

// The default rollout change adds a vCPU, whatever the pool had.
func TestTheCPUChangeAddsOneVCPU(t *testing.T) {
	for in, want := range map[any]string{"1": "2", "4": "5", nil: "2"} {
		g := map[string]any{}
		if in != nil {
			g["resources"] = map[string]any{"cpu": in, "memory": "4Gi"}
		}
		CPUChange().Mutate(g)
		res := g["resources"].(map[string]any)
		if res["cpu"] != want {
			t.Errorf("cpu %v became %v, want %s", in, res["cpu"], want)
		}
		if in != nil && res["memory"] != "4Gi" {
			t.Errorf("memory changed: %v", res["memory"])
		}
	}
}
