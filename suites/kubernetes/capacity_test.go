package kubernetes

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// The kind lifecycle lane runs eleven workers in its pools (the join clusters' 3 + 3 and the
// lifecycle cluster's 5, every cluster at once), and one lifecycle phase at a time adds at most
// two: scaling grows pool scale from 1 to 3, and the rollout surges pool roll by its maxReplicas
// of 2.
func TestPeakWorkersOfTheLifecycleLane(t *testing.T) {
	l, err := lane.Load(filepath.Join("..", "..", "lanes", "kubernetes-lifecycle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := PeakWorkers(l)
	if err != nil {
		t.Fatal(err)
	}
	if p.Workers != 13 {
		t.Errorf("peak %d workers, want 13: %s", p.Workers, p.Why)
	}
	for _, want := range []string{"11 in the pools of join-v1-35 3 + join-v1-34 3 + lifecycle 5", "remediation +1", "scaling +2 (pool scale from 1 to 3)", "rollout +2 (pool roll surges"} {
		if !strings.Contains(p.Why, want) {
			t.Errorf("the arithmetic lacks %q: %s", want, p.Why)
		}
	}
	// Without the lifecycle specs, the pools are the peak.
	l.Suites[0].LabelFilter = "!lifecycle"
	if p, err = PeakWorkers(l); err != nil || p.Workers != 11 {
		t.Errorf("without the lifecycle specs: %d workers (%s), %v; want 11", p.Workers, p.Why, err)
	}
	// A rollout of a larger pool surges by all of its workers.
	l.Suites[0].LabelFilter = ""
	for i := range l.Pools {
		if l.Pools[i].Lifecycle == suiterun.PhaseRollout {
			l.Pools[i].Replicas = 4
		}
	}
	if p, err = PeakWorkers(l); err != nil || p.Workers != 13+2+2 {
		t.Errorf("with a rollout pool of 4: %d workers (%s), %v; want 17", p.Workers, p.Why, err)
	}
}

// The capacity arithmetic picks the pool the specs act on by the rule the suite uses.
func TestLanePoolForPicksAsPoolFor(t *testing.T) {
	for _, pools := range [][]lane.Pool{
		{{Name: "a", Replicas: 1}, {Name: "b", Replicas: 3}, {Name: "c", Replicas: 1}},
		{{Name: "a", Replicas: 2}, {Name: "b", Replicas: 2}},
		{{Name: "a", Replicas: 2}, {Name: "b", Replicas: 1, Lifecycle: suiterun.PhaseRollout}, {Name: "c", Replicas: 5}},
	} {
		var fps []join.Pool
		for _, p := range pools {
			fps = append(fps, join.Pool{Spec: p})
		}
		for _, spec := range []string{suiterun.PhaseRemediation, suiterun.PhaseScaling, suiterun.PhaseRollout} {
			if got, want := pools[suiterun.LanePoolFor(pools, spec)].Name, suiterun.PoolFor(fps, spec).Name(); got != want {
				t.Errorf("%s over %+v: LanePoolFor picks %s, PoolFor %s", spec, pools, got, want)
			}
		}
	}
}
