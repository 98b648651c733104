// Package existing is the substrate of a management cluster that is already there with the
// platform installed: a KUBECONFIG (a kept kind cluster, a maintainer's own cluster). It never
// creates or deletes the cluster; its Up judges the cluster with the same component and
// platform gates the kind substrate passes, and E2E_FROM_PHASE skips them.
package existing

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/substrate/kind"
)

// probeTimeout bounds the preflight's one request to the apiserver.
const probeTimeout = 4 * time.Second

// Options configure the existing substrate.
type Options struct {
	substrate.Options
	// Kubeconfig is the management cluster's kubeconfig (KUBECONFIG).
	Kubeconfig string
	// FromPhase starts later in the plan (E2E_FROM_PHASE); earlier phases are recorded skipped.
	FromPhase string
}

// OptionsFromEnv reads KUBECONFIG and E2E_FROM_PHASE.
func OptionsFromEnv(base substrate.Options) Options {
	return Options{Options: base, Kubeconfig: os.Getenv("KUBECONFIG"), FromPhase: os.Getenv("E2E_FROM_PHASE")}
}

// Substrate is an existing management cluster.
type Substrate struct {
	lane *lane.Lane
	opts Options
	c    *cluster.Cluster
}

// New builds the existing substrate of lane l.
func New(l *lane.Lane, o Options) (*Substrate, error) {
	if o.FromPhase != "" {
		if _, ok := l.Budget.Phase(o.FromPhase); !ok {
			return nil, fmt.Errorf("E2E_FROM_PHASE=%s is not a phase of %s", o.FromPhase, l.File)
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return &Substrate{lane: l, opts: o}, nil
}

// Name is "existing".
func (s *Substrate) Name() string { return "existing" }

// Preflight checks that the kubeconfig is there and its apiserver answers.
func (s *Substrate) Preflight(ctx context.Context) error {
	if s.opts.Kubeconfig == "" {
		return &substrate.PreflightError{Substrate: "existing", Missing: "KUBECONFIG is not set", Hint: "point KUBECONFIG at the management cluster that has the platform"}
	}
	if _, err := os.Stat(s.opts.Kubeconfig); err != nil {
		return &substrate.PreflightError{Substrate: "existing", Missing: "KUBECONFIG " + s.opts.Kubeconfig + ": " + err.Error()}
	}
	c, err := cluster.FromKubeconfig("management", s.opts.Kubeconfig)
	if err != nil {
		return &substrate.PreflightError{Substrate: "existing", Missing: err.Error()}
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if _, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/version").Do(pctx).Raw(); err != nil {
		return &substrate.PreflightError{Substrate: "existing", Missing: fmt.Sprintf("the apiserver of %s does not answer: %v", s.opts.Kubeconfig, err),
			Hint: "is the cluster up (docker ps for a kept kind cluster)?"}
	}
	c.TenantConfig = kind.TenantAccess(c, s.opts.Log)
	c.TenantUnanswered = kind.Unannounced(c.Kube)
	s.c = c
	return nil
}

// Up records the cluster phase as skipped and runs the component and platform gates.
func (s *Substrate) Up(ctx context.Context, clock *budget.Clock) (*cluster.Cluster, error) {
	if s.c == nil {
		if err := s.Preflight(ctx); err != nil {
			return nil, err
		}
	}
	skipping := s.opts.FromPhase != ""
	for _, phase := range []string{"cluster", "components", "platform"} {
		if _, ok := s.lane.Budget.Phase(phase); !ok {
			continue
		}
		if phase == s.opts.FromPhase {
			skipping = false
		}
		switch {
		case phase == "cluster":
			if err := clock.Skip(phase, "existing cluster "+s.opts.Kubeconfig); err != nil {
				return nil, err
			}
			continue
		case skipping:
			if err := clock.Skip(phase, "E2E_FROM_PHASE="+s.opts.FromPhase); err != nil {
				return nil, err
			}
			continue
		}
		pctx, span, err := clock.Phase(ctx, phase)
		if err != nil {
			return nil, err
		}
		o := install.Options{Lane: s.lane, GatesOnly: true}
		o.Log = s.opts.Log
		o.Emulation = s.lane.Kind != nil && s.lane.Kind.Emulation
		o.Note = span.Note
		if phase == "components" {
			err = install.Components(pctx, s.c, o)
		} else {
			err = install.Platform(pctx, s.c, o)
		}
		span.End(err)
		if err != nil {
			return s.c, fmt.Errorf("phase %s on the existing cluster: %w", phase, err)
		}
	}
	return s.c, nil
}

// Down leaves the cluster as it is; with E2E_KEEP=1 it says how to reach it.
func (s *Substrate) Down(context.Context) error {
	if s.opts.Keep {
		for _, line := range s.Describe() {
			fmt.Fprintln(s.opts.Log, line)
		}
	}
	return nil
}

// Describe says how to reach the cluster.
func (s *Substrate) Describe() []string {
	abs, _ := filepath.Abs(s.opts.Kubeconfig)
	return []string{
		"existing management cluster (never deleted by the harness)",
		"  kubeconfig: " + abs,
		"  tenant apiservers: LoadBalancer Services labelled " + kind.TenantLBLabel,
	}
}

var _ substrate.Substrate = (*Substrate)(nil)
var _ substrate.Access = (*Substrate)(nil)
