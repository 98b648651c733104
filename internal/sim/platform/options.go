package platform

import (
	"io"
	"time"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

// Options configure the platform stand-in.
type Options struct {
	// Versions maps the app's spec.version (a versions.yaml key, "v1.35") to the exact release.
	Versions map[string]string
	// Canary is the value of the canary Secret planted in every tenant namespace.
	Canary string
	// Faults selected for the run (cluster-dns-mismatch renders a dnsServiceIPs address no CoreDNS holds).
	Faults *faults.Set
	// Health are the MachineHealthCheck values rendered on every pool an app does not set its
	// own for: the chart's (ChartHealthTimers) unless the lane overrides them.
	Health HealthTimers
	Log    io.Writer
}

// HealthTimers are the chart's MachineHealthCheck values: nodeHealthCheck.maxUnhealthy and
// .nodeStartupTimeout from its values, and the Ready=Unknown and Ready=False timeouts its template
// fixes.
type HealthTimers struct {
	NodeStartupTimeout  time.Duration
	ReadyUnknownTimeout time.Duration
	ReadyFalseTimeout   time.Duration
	// MaxUnhealthy is a bare integer or an integer percentage ("50%").
	MaxUnhealthy string
}

// ChartHealthTimers are the Cozystack v1.6.1 Kubernetes chart's: maxUnhealthy "50%" and
// nodeStartupTimeout 10m (packages/apps/kubernetes/values.yaml:307-309), Ready Unknown for 30s
// and Ready False for 300s (templates/cluster.yaml:844-849). At 50% a one-machine pool is never
// remediated.
func ChartHealthTimers() HealthTimers {
	return HealthTimers{NodeStartupTimeout: 10 * time.Minute, ReadyUnknownTimeout: 30 * time.Second, ReadyFalseTimeout: 300 * time.Second, MaxUnhealthy: "50%"}
}
