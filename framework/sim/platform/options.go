package platform

import (
	"io"
	"time"

	"github.com/cozystack/cozy-e2e/framework/sim/faults"
)

// Options configure the platform stand-in.
type Options struct {
	// Versions maps the app's spec.version (a versions.yaml key, "v1.35") to the exact release.
	Versions map[string]string
	// Canary is the value of the canary Secret planted in every tenant namespace.
	Canary string
	// Faults selected for the run (cluster-dns-mismatch renders a dnsServiceIPs address no CoreDNS holds).
	Faults *faults.Set
	// Health are the MachineHealthCheck timers rendered on every pool; short in the sim so the
	// real MachineHealthCheck controller remediates within a run.
	Health HealthTimers
	Log    io.Writer
}

// HealthTimers are the chart's nodeHealthCheck values.
type HealthTimers struct {
	NodeStartupTimeout  time.Duration
	ReadyUnknownTimeout time.Duration
	ReadyFalseTimeout   time.Duration
	// MaxUnhealthy is "50%" in the chart; the sim lane may widen it so one-machine pools remediate.
	MaxUnhealthy string
}

// ChartHealthTimers are the chart's defaults (20m, 5m, 10m, 50%).
func ChartHealthTimers() HealthTimers {
	return HealthTimers{NodeStartupTimeout: 20 * time.Minute, ReadyUnknownTimeout: 5 * time.Minute, ReadyFalseTimeout: 10 * time.Minute, MaxUnhealthy: "50%"}
}
