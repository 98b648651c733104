package lane

import (
	"strings"
	"testing"
)

// policy.remediation takes report or fail, each defaulting as Cozystack's own e2e judges:
// report at install, fail on the tenant's release.
func TestRemediationPolicy(t *testing.T) {
	l, err := Parse("lanes/x.yaml", []byte(kindGood))
	if err != nil {
		t.Fatal(err)
	}
	if r := l.Policy.Remediation; r.InstallPolicy() != RemediationReport || r.TenantPolicy() != RemediationFail {
		t.Fatalf("defaults: install %s, tenant %s", r.InstallPolicy(), r.TenantPolicy())
	}
	data := strings.Replace(kindGood, "platform:\n", "policy:\n  remediation: {install: fail, tenant: warn}\nplatform:\n", 1)
	_, err = Parse("lanes/x.yaml", []byte(data))
	if err == nil || !strings.Contains(err.Error(), `policy.remediation.tenant: "warn" is neither report nor fail`) || strings.Contains(err.Error(), "remediation.install") {
		t.Fatalf("want the tenant value refused alone, got %v", err)
	}
}
