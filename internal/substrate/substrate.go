// Package substrate is where the management cluster comes from. A suite never asks which one
// it runs on: it gets a *cluster.Cluster with the platform installed.
package substrate

import (
	"context"
	"io"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// Substrate brings up and tears down a management cluster with the platform installed.
type Substrate interface {
	// Name is "kind", "existing" or "sim".
	Name() string
	// Preflight checks, fast and before anything slow, that this machine can run the substrate.
	// Its errors name what is missing; the run exits 2 on them.
	Preflight(ctx context.Context) error
	// Up brings up the management cluster with the platform installed, one lane phase at a time
	// through clock, and returns it. On error it returns the management cluster as far as it
	// came up (nil when it never did), so the run can read what explains the failure; Down
	// then tears down whatever Up left running.
	Up(ctx context.Context, clock *budget.Clock) (*cluster.Cluster, error)
	// Down tears everything down; idempotent; keeps everything when the run asked to keep it.
	Down(ctx context.Context) error
}

// Options are what every substrate constructor takes besides the lane.
type Options struct {
	// Artifacts is the run's artifacts folder; a substrate writes its evidence (never a
	// credential) under Artifacts/substrate.
	Artifacts string
	// WorkDir is the run's private folder (kubeconfigs, process state); not an artifact.
	WorkDir string
	// Keep leaves everything running at Down (E2E_KEEP=1), for a person to inspect.
	Keep bool
	// Reuse skips bring-up when a cluster from an earlier run is there (E2E_REUSE=1).
	Reuse bool
	// Log receives progress lines for people.
	Log io.Writer
}

// Access is how a person reaches what a substrate runs, printed when a run keeps its clusters.
type Access interface {
	// Describe says how to reach the management cluster and each tenant (kubeconfig paths,
	// commands), in lines for a terminal.
	Describe() []string
}

// Component is one real upstream piece a run uses: the module it is built or read from, its
// version, and the sum go.sum pins it by (run.json lists them); for a Debian package, Module is
// "debian [<suite>] <package>", Version the package's, and Sum empty.
type Component struct {
	Name    string `json:"name"`
	Module  string `json:"module"`
	Version string `json:"version"`
	Sum     string `json:"sum"`
	// Use says how the run uses it ("process", "in process", "chart", ...).
	Use string `json:"use"`
}

// Inventory is a substrate that can list the real components a run of it uses; valid after
// Preflight.
type Inventory interface {
	Components() ([]Component, error)
}

// PreflightError is a missing prerequisite; the run exits 2 with its message.
type PreflightError struct {
	Substrate string
	Missing   string // what is missing, in words
	Hint      string // what to do about it
}

func (e *PreflightError) Error() string {
	msg := "preflight (" + e.Substrate + "): " + e.Missing
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// ConfigurationError is a bring-up stopped by something the lane or the invocation got wrong
// (a disabled Package the platform turned out to need, a platform source that cannot be
// used), not by the product: the run judges it class configuration and exits 2.
type ConfigurationError struct{ Err error }

func (e *ConfigurationError) Error() string { return e.Err.Error() }

func (e *ConfigurationError) Unwrap() error { return e.Err }
