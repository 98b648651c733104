package suiterun

import (
	"fmt"
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

// tenantNodeMonitorGracePeriod is what the tenant's kube-controller-manager runs
// --node-monitor-grace-period at: Kubernetes' default (v1.35.4
// pkg/controller/nodelifecycle/config/v1alpha1/defaults.go:40-46), since Kamaji passes the flag
// only from a TenantControlPlane's extraArgs and the chart gives none (docs/signals.md).
const tenantNodeMonitorGracePeriod = 50 * time.Second

// The Kubernetes chart's MachineHealthCheck defaults, by revision (cozystack/cozystack
// packages/apps/kubernetes): at main 3c780acd417f nodeHealthCheck.nodeStartupTimeout 20m,
// readyUnknownTimeout 5m and readyFalseTimeout 10m (values.yaml:308-310, rendered at
// templates/cluster.yaml:943-956); at v1.6.1 and v1.6.2 nodeStartupTimeout 10m (values.yaml:309)
// and the Ready=Unknown and Ready=False timeouts fixed at 30s and 300s (templates/cluster.yaml:
// 847, 850). The lifecycle specs read the pool's check as the installed platform renders it and
// set what they wait on (holdTimeouts); these are what the plan says they will find.
const (
	mainNodeStartupTimeout  = 20 * time.Minute
	mainReadyUnknownTimeout = 5 * time.Minute
	mainReadyFalseTimeout   = 10 * time.Minute
	v16NodeStartupTimeout   = 10 * time.Minute
	v16ReadyUnknownTimeout  = 30 * time.Second
	v16ReadyFalseTimeout    = 300 * time.Second
)

// TimeoutHolder says how a lifecycle spec gets the product to run a timeout at the lane's value,
// or why none can, and what the platform's revisions run by default.
func TimeoutHolder(name string) string {
	switch name {
	case NodeMonitorGracePeriod:
		return fmt.Sprintf("the tenant controller manager's --node-monitor-grace-period, %s, Kubernetes' default (v1.35.4 pkg/controller/nodelifecycle/config/v1alpha1/defaults.go:40-46): Kamaji passes no such flag and no spec sets it", tenantNodeMonitorGracePeriod)
	case ReadyUnknownTimeout:
		return fmt.Sprintf("set by the remediation spec as nodeHealthCheck.readyUnknownTimeout where the installed chart renders another: main's default %s (packages/apps/kubernetes/values.yaml:309); v1.6.1 and v1.6.2 render %s, fixed (templates/cluster.yaml:847), and take no setting",
			mainReadyUnknownTimeout, v16ReadyUnknownTimeout)
	case NodeStartupTimeout:
		return fmt.Sprintf("set by the spec on its pool as nodeGroups.<pool>.nodeStartupTimeout where the installed chart renders another: main's default %s (values.yaml:308), v1.6.1's and v1.6.2's %s (values.yaml:309)",
			mainNodeStartupTimeout, v16NodeStartupTimeout)
	case Gone:
		return "the harness's own bound (Cozystack's own cleanup waits 5m for its apps to go, hack/e2e-chainsaw/_lib/run-kubernetes.sh:304)"
	}
	return ""
}

// ReadyFalseNote says why no lifecycle phase counts the Ready=False timeout.
func ReadyFalseNote() string {
	return fmt.Sprintf("Ready=False (main's readyFalseTimeout %s, values.yaml:310; %s at v1.6.1 and v1.6.2): no spec waits on it (a stopped worker's Node goes Unknown)", mainReadyFalseTimeout, v16ReadyFalseTimeout)
}

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
		Margin: remediationMargin, Why: "the Node goes Unknown, the MachineHealthCheck marks the Machine, and its replacement must have a Node within the startup timeout",
		Fixed: map[string]lane.FixedTimeout{NodeMonitorGracePeriod: {Value: tenantNodeMonitorGracePeriod, Why: TimeoutHolder(NodeMonitorGracePeriod)}}}
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
// deletion, each within the lane's bound, in a shared phase (it deletes every cluster).
func DeletionPhase() lane.PhaseNeed {
	return lane.PhaseNeed{Name: PhaseDeletion, Waits: []string{Gone, Gone}, Margin: deletionMargin, Shared: true,
		Why: "the Kubernetes app, then the tenant, each gone within the bound"}
}
