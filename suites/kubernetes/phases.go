package kubernetes

import (
	"fmt"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/testbed"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// Name is the suite's name (suites/<name>, lanes' suites[].name).
const Name = "kubernetes"

// Labels of the suite's specs a lane's label filter selects by.
const (
	LabelRefusals  = "refusals"
	LabelLifecycle = "lifecycle"
)

// Selection is which of the suite's specs a lane's label filter runs.
type Selection struct {
	Refusals    bool
	Remediation bool
	Scaling     bool
	Rollout     bool
	Deletion    bool
}

// Select evaluates the lane's label filter for this suite on the labels the specs carry.
func Select(l *lane.Lane) (Selection, error) {
	filter := ""
	for _, s := range l.Suites {
		if s.Name == Name {
			filter = s.LabelFilter
		}
	}
	match, err := types.ParseLabelFilter(filter)
	if err != nil {
		return Selection{}, fmt.Errorf("suites[%s].labelFilter %q: %w", Name, filter, err)
	}
	on := func(labels ...string) bool { return match(append([]string{"lane:" + l.Name}, labels...)) }
	return Selection{
		Refusals:    on(LabelRefusals),
		Remediation: on(LabelLifecycle, suiterun.PhaseRemediation),
		Scaling:     on(LabelLifecycle, suiterun.PhaseScaling),
		Rollout:     on(LabelLifecycle, suiterun.PhaseRollout),
		Deletion:    on(LabelLifecycle, suiterun.PhaseDeletion),
	}, nil
}

// Phases are the lane phases the suite runs in on lane l, in order: the tenant and its pools,
// then what the lane's label filter selects (the refusals, each lifecycle spec with the floor
// its product timeouts set), then the teardown. A lane without one of them is refused by
// lanes-check, and the suite judges it a configuration failure rather than the product's.
func Phases(l *lane.Lane) ([]lane.PhaseNeed, error) {
	sel, err := Select(l)
	if err != nil {
		return nil, err
	}
	out := []lane.PhaseNeed{{Name: testbed.PhaseTenant}, {Name: testbed.PhasePools}}
	if sel.Refusals {
		out = append(out, lane.PhaseNeed{Name: suiterun.PhaseRefusals, Cluster: lane.RefusalCluster})
	}
	// A lifecycle spec acts on one pool: on a budget with timelines, its phase is on the
	// timeline of that pool's cluster (or shared).
	on := func(n lane.PhaseNeed) lane.PhaseNeed {
		if len(l.Pools) > 0 {
			n.Cluster = l.Pools[suiterun.LanePoolFor(l.Pools, n.Name)].ClusterName()
		}
		return n
	}
	if sel.Remediation {
		out = append(out, on(suiterun.RemediationPhase()))
	}
	if sel.Scaling {
		out = append(out, on(suiterun.ScalingPhase()))
	}
	if sel.Rollout {
		out = append(out, on(suiterun.RolloutPhase()))
	}
	if sel.Deletion {
		out = append(out, suiterun.DeletionPhase())
	}
	return append(out, lane.PhaseNeed{Name: testbed.PhaseTeardown, Shared: true}), nil
}
