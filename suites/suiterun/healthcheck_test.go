package suiterun

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// mhcAt is a pool's MachineHealthCheck as a chart revision renders it by default.
func mhcAt(startup, unknown, notReady time.Duration) *clusterv1.MachineHealthCheck {
	s := func(d time.Duration) *int32 { return ptr.To(int32(d / time.Second)) }
	m := &clusterv1.MachineHealthCheck{}
	m.Spec.Checks.NodeStartupTimeoutSeconds = s(startup)
	m.Spec.Checks.UnhealthyNodeConditions = []clusterv1.UnhealthyNodeCondition{
		{Type: "Ready", Status: "Unknown", TimeoutSeconds: s(unknown)},
		{Type: "Ready", Status: "False", TimeoutSeconds: s(notReady)},
	}
	return m
}

// A lifecycle spec sets every MachineHealthCheck timeout it waits on where the installed chart
// renders another: on a platform built from cozystack main (nodeStartupTimeout 20m,
// readyUnknownTimeout 5m, readyFalseTimeout 10m, packages/apps/kubernetes/values.yaml:308-310)
// the remediation spec sets the pool's nodeStartupTimeout and the app's readyUnknownTimeout to
// the lane's; on v1.6.1 (10m, 30s fixed, 300s) it writes nothing. A platform that does not take
// a setting is named, with what it runs.
func TestTheSpecsSetTheTimeoutsTheyWaitOn(t *testing.T) {
	lane := map[string]time.Duration{NodeStartupTimeout: 10 * time.Minute, ReadyUnknownTimeout: 30 * time.Second}
	main := timeoutsOf(mhcAt(20*time.Minute, 5*time.Minute, 10*time.Minute))
	if main.String() != "nodeStartupTimeout 20m0s, Ready=Unknown 5m0s, Ready=False 10m0s" {
		t.Fatalf("main's check reads %s", main)
	}
	group := map[string]any{"maxUnhealthy": "100%"}
	app, set := timeoutChanges("remed", main, lane, group)
	if group["nodeStartupTimeout"] != "10m0s" || group["maxUnhealthy"] != "100%" || app["readyUnknownTimeout"] != "30s" || len(app) != 1 {
		t.Fatalf("on main: group %v, app %v", group, app)
	}
	if strings.Join(set, "; ") != "nodeGroups.remed.nodeStartupTimeout=10m0s (was 20m0s); nodeHealthCheck.readyUnknownTimeout=30s (Ready=Unknown was 5m0s)" {
		t.Fatalf("said %q", set)
	}
	v161 := timeoutsOf(mhcAt(10*time.Minute, 30*time.Second, 300*time.Second))
	group = map[string]any{}
	if app, set := timeoutChanges("remed", v161, lane, group); len(group) != 0 || len(app) != 0 || len(set) != 0 {
		t.Fatalf("on v1.6.1 the spec wrote %v %v %v", group, app, set)
	}
	// Scaling and rollout wait on the startup timeout only.
	group = map[string]any{}
	if app, _ := timeoutChanges("scale", main, map[string]time.Duration{NodeStartupTimeout: 10 * time.Minute}, group); len(app) != 0 || group["nodeStartupTimeout"] != "10m0s" {
		t.Fatalf("scaling on main: group %v, app %v", group, app)
	}

	if err := unheld(PhaseRemediation, "kubernetes-pools-remed", main, v161, lane); err != nil {
		t.Fatalf("the check runs the lane's timeouts: %v", err)
	}
	err := unheld(PhaseRemediation, "kubernetes-pools-remed", v161, v161, map[string]time.Duration{ReadyUnknownTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "budget phase remediation declares readyUnknownTimeout 1m0s, but it runs 30s, once the platform rendered the spec's setting: MachineHealthCheck kubernetes-pools-remed (installed: nodeStartupTimeout 10m0s, Ready=Unknown 30s, Ready=False 5m0s) does not take it") {
		t.Fatalf("a platform that does not take it: %v", err)
	}
}
