package simulated

import (
	"fmt"
	"os"
	"path/filepath"
)

// HarnessUser is the management apiserver's name for the harness: the token user the orchestrator
// and its suites reach the management cluster as, through the proxy. The sim's own controllers
// and stand-ins use the apiserver's admin certificate, so an audit log of this user alone is the
// harness's own traffic.
const HarnessUser = "e2e-harness"

// AuditLogEnv names the file the management kube-apiserver writes its audit log to, one JSON
// event a line, for the harness's requests alone (HarnessUser): how many it makes, of which verb,
// is read from the apiserver's side (hack/scalebench reads it). Unset, no audit log.
const AuditLogEnv = "E2E_SIM_AUDIT_LOG"

// auditPolicy logs every request of HarnessUser at level Metadata (verb, resource, user agent, no
// bodies) from the moment the apiserver answers (ResponseStarted for a watch, ResponseComplete
// for the rest) and nothing of anyone else. The shape is audit.k8s.io/v1 Policy
// (k8s.io/apiserver v0.35.4 pkg/apis/audit/v1/types.go:170-263: omitStages, rules with users
// and level, the first matching rule deciding).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: [` + HarnessUser + `]
  - level: None
`

// auditArgs are the management kube-apiserver's flags for an audit log at path, with its policy
// written into dir: --audit-policy-file and --audit-log-path (k8s.io/apiserver v0.35.4
// pkg/server/options/audit.go:258, 436), --audit-log-format json (line 444), the blocking mode
// by default (line 159), so no event is lost when the apiserver stops.
func auditArgs(dir, path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", AuditLogEnv, path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("%s=%s: its folder: %w", AuditLogEnv, path, err)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + abs, "--audit-log-format=json"}, nil
}
