package registry

import (
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// The lifecycle lane's plan says, for each lifecycle phase, the ceiling against the timeouts its
// spec waits on, how the installed platform comes to run each at the lane's value, and the chart
// revisions' own defaults; a lane without lifecycle specs has no such section.
func TestThePlanSaysHowTheLifecycleTimeoutsAreHeld(t *testing.T) {
	lines := strings.Join(LifecycleTimeoutLines(load(t, "kubernetes-lifecycle")), "\n")
	for _, want := range []string{
		"remediation: ceiling 13m0s, at least 12m50s = nodeMonitorGracePeriod 50s + readyUnknownTimeout 30s + nodeStartupTimeout 10m0s + margin 1m30s",
		"readyUnknownTimeout 30s: set by the remediation spec as nodeHealthCheck.readyUnknownTimeout where the installed chart renders another: main's default 5m0s",
		"nodeStartupTimeout 10m0s: set by the spec on its pool as nodeGroups.<pool>.nodeStartupTimeout where the installed chart renders another: main's default 20m0s (values.yaml:308), v1.6.1's and v1.6.2's 10m0s",
		"scaling: ceiling 12m0s, at least 12m0s", "rollout: ceiling 12m0s, at least 12m0s",
		"Ready=False (main's readyFalseTimeout 10m0s",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("the plan lacks %q:\n%s", want, lines)
		}
	}
	if got := LifecycleTimeoutLines(load(t, "kubernetes")); len(got) != 0 {
		t.Errorf("kubernetes-latest runs no lifecycle spec, yet: %v", got)
	}
}

// The tenant controller manager's grace period is the one wait no spec sets: a lane that
// declares less than it runs is refused, as its ceiling would not hold the wait.
func TestAGracePeriodUnderThePlatformsIsRefused(t *testing.T) {
	l := load(t, "kubernetes-lifecycle")
	for i, p := range l.Budget.Phases {
		if p.Name == "remediation" {
			l.Budget.Phases[i].Timeouts["nodeMonitorGracePeriod"] = lane.Duration(40_000_000_000)
		}
	}
	err := Check(l)
	if err == nil || !strings.Contains(err.Error(), "timeouts.nodeMonitorGracePeriod: 40s is under 50s, what the platform runs it at and no spec of suite kubernetes can set") {
		t.Fatalf("want the grace period refused, got %v", err)
	}
}
