package specs

import (
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// The lane phases the lifecycle specs run in, in this order after the pools (and refusals).
const (
	PhaseRemediation = "remediation"
	PhaseScaling     = "scaling"
	PhaseRollout     = "rollout"
	PhaseDeletion    = "deletion"
)

// The product timeouts a lane declares for the lifecycle phases (budget.phases[].timeouts):
// the values its platform runs with, which the specs wait on and lanes-check adds up.
const (
	// NodeMonitorGracePeriod is the tenant kube-controller-manager's --node-monitor-grace-period:
	// how long a Node whose kubelet went silent stays Ready before it turns Unknown (50s by
	// default in v1.35; Kamaji runs the tenant's controller manager with its defaults).
	NodeMonitorGracePeriod = "nodeMonitorGracePeriod"
	// ReadyUnknownTimeout is the MachineHealthCheck's Ready=Unknown condition timeout (30s in
	// the chart, cozystack v1.6.1 packages/apps/kubernetes/templates/cluster.yaml:844-847).
	ReadyUnknownTimeout = "readyUnknownTimeout"
	// NodeStartupTimeout is the MachineHealthCheck's nodeStartupTimeout: how long a new
	// Machine has to get a Node (the chart's nodeHealthCheck.nodeStartupTimeout, 10m by
	// default; the remediation spec sets it on its pool, nodeGroups.<pool>.nodeStartupTimeout).
	NodeStartupTimeout = "nodeStartupTimeout"
	// Gone is the bound the deletion spec holds the platform to: from each delete to nothing
	// of it left.
	Gone = "gone"
)

// Margins beyond the product timeouts: a Machine's deletion and its replacement's VM being
// made, the Node going Ready and a workload pod running on it after it registers.
const (
	remediationMargin = 90 * time.Second
	workerMargin      = 60 * time.Second
	deletionMargin    = 30 * time.Second
)

// RemediationPhase is what the remediation spec needs of a lane: its phase, holding the
// silent Node's grace period, the Ready=Unknown timeout and a replacement's startup timeout,
// one after another, and the margin.
func RemediationPhase() lane.PhaseNeed {
	return lane.PhaseNeed{Name: PhaseRemediation, Waits: []string{NodeMonitorGracePeriod, ReadyUnknownTimeout, NodeStartupTimeout},
		Margin: remediationMargin, Why: "the Node goes Unknown, the MachineHealthCheck marks the Machine, and its replacement must have a Node within the startup timeout"}
}

// ScalingPhase is what the scaling spec needs of a lane: new workers must have their Nodes
// within the startup timeout, and the removed ones go.
func ScalingPhase() lane.PhaseNeed {
	return lane.PhaseNeed{Name: PhaseScaling, Waits: []string{NodeStartupTimeout}, Margin: 2 * workerMargin,
		Why: "the added workers must have Nodes within the MachineHealthCheck's startup timeout, then the removed ones go"}
}

// RolloutPhase is what the rollout spec needs of a lane: the new workers must have their
// Nodes within the startup timeout, the old ones go.
func RolloutPhase() lane.PhaseNeed {
	return lane.PhaseNeed{Name: PhaseRollout, Waits: []string{NodeStartupTimeout}, Margin: 2 * workerMargin,
		Why: "the new workers must have Nodes within the MachineHealthCheck's startup timeout, then the old ones go"}
}

// DeletionPhase is what the deletion spec needs of a lane: the app's and then the tenant's
// deletion, each within the lane's bound.
func DeletionPhase() lane.PhaseNeed {
	return lane.PhaseNeed{Name: PhaseDeletion, Waits: []string{Gone, Gone}, Margin: deletionMargin,
		Why: "the Kubernetes app, then the tenant, each gone within the bound"}
}
