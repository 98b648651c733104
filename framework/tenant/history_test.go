package tenant_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/testkit"
	"github.com/cozystack/cozy-e2e/internal/testkit/tenantenv"
)

// The tenant's release is judged by its history as Cozystack's e2e judges it, and the lane's
// policy decides whether a remediation fails the run or is reported.
func testReleaseHistoryFollowsThePolicy(t *testing.T, env *tenantenv.Env) {
	ctx := testkit.Context(t, 30*time.Second)
	p := tenant.Platform{Mgmt: env.Cluster}
	env.Namespace(t, "tenant-h")
	for _, tc := range []struct {
		name    string
		history []any
		policy  string
		err     string
		note    string
	}{
		{"clean", []any{map[string]any{"version": int64(1), "status": "deployed"}}, lane.RemediationFail, "", ""},
		{"empty", nil, lane.RemediationReport, "empty status.history", ""},
		{"failed, policy fail", []any{map[string]any{"version": int64(2), "status": "deployed"}, map[string]any{"version": int64(1), "status": "failed"}},
			lane.RemediationFail, "1 remediated (v1 failed) (policy.remediation.tenant: fail", ""},
		{"failed, policy report", []any{map[string]any{"version": int64(2), "status": "deployed"}, map[string]any{"version": int64(1), "status": "uninstalled"}},
			lane.RemediationReport, "", "1 remediated (v1 uninstalled) (reported, policy.remediation.tenant: report)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := tenant.For("tenant-h", "h"+strings.ReplaceAll(strings.ReplaceAll(tc.name, ",", ""), " ", "-"))
			env.HelmRelease(t, names, "", "", "")
			status := map[string]any{"conditions": []any{tenantenv.Ready("True", "InstallSucceeded", "ok")}}
			if tc.history != nil {
				status["history"] = tc.history
			}
			env.SetStatus(t, tenant.HelmReleaseGVK, names.Namespace, names.HelmRelease(), status)
			note, err := p.CheckReleaseHistory(ctx, names, tc.policy)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v; want one with %q", err, tc.err)
			case !strings.Contains(note, tc.note) || (tc.note == "") != (note == ""):
				t.Fatalf("note %q; want %q", note, tc.note)
			}
		})
	}
}
