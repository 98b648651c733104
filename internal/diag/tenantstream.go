package diag

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// TenantStream is a suite's diagnostics as a value the testbed is handed
// (testbed.Options.Diagnostics): the testbed starts it when the tenant namespace exists, names
// each pool's folder before its cluster is created and each tenant cluster once its control
// plane is up, reads the run's consoles from it, and asks it for the evidence of a leak in
// teardown; the suite asks it for a failed spec's evidence (Collect) and stops it at the end.
// It calls nothing back. Safe for concurrent use; NewTenantStream makes one.
type TenantStream struct {
	o TenantStreamOptions

	mu  sync.Mutex
	rec *Recorder
}

// TenantStreamOptions say where a suite's diagnostics go and what bounds its on-failure
// collectors.
type TenantStreamOptions struct {
	// Artifacts is the run's artifacts folder; Manifest records every collector, as Process.
	Artifacts string
	Manifest  *Manifest
	Process   string
	// Management is the cluster the tenant namespace lives in.
	Management *cluster.Cluster
	// DefaultCluster is the lane's name for its default conformance cluster, whose tenant
	// cluster is written under clusters/tenant/ (another's under clusters/tenant-<role>/).
	DefaultCluster string
	// Budget bounds the on-failure collectors: the run's clock and the lane's reserve.
	Budget Budget
	// Interrupt ends at the signal that interrupts the suite: from then on the on-failure
	// collectors are declined (the run ends within its grace), recorded as such. Nil: never.
	Interrupt context.Context
}

// NewTenantStream is a stream not started yet.
func NewTenantStream(o TenantStreamOptions) *TenantStream { return &TenantStream{o: o} }

// StartDiagnostics starts streaming the tenant namespace: events, the condition timeline and,
// for each pool given to WatchPool, its consoles.
func (s *TenantStream) StartDiagnostics(ctx context.Context, namespace string) error {
	a, err := NewArtifacts(s.o.Artifacts, NewRedactor(), 0)
	if err != nil {
		return err
	}
	rec, err := Start(ctx, Options{Artifacts: a, Manifest: s.o.Manifest, Process: s.o.Process, Management: s.o.Management, Namespace: namespace})
	if err != nil {
		return fmt.Errorf("diagnostics: %w", err)
	}
	s.mu.Lock()
	s.rec = rec
	s.mu.Unlock()
	return nil
}

// Recorder is the started stream, nil before StartDiagnostics (and on a nil stream: the
// methods below then do nothing).
func (s *TenantStream) Recorder() *Recorder {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec
}

// Consoles is the run's console hub, which the stream reads the VMIs' consoles from; the joins
// judge the guests' boot from it too (join.Options.Consoles). Nil before StartDiagnostics.
func (s *TenantStream) Consoles() *serialconsole.Hub {
	if r := s.Recorder(); r != nil {
		return r.ConsoleHub()
	}
	return nil
}

// WatchPool attributes pool p's objects to its own folder from now on.
func (s *TenantStream) WatchPool(p tenant.PoolNames) {
	if r := s.Recorder(); r != nil {
		r.WatchPool(p)
	}
}

// WatchTenant streams the tenant cluster c of the conformance cluster app too, under the folder
// TenantFolder names for role.
func (s *TenantStream) WatchTenant(ctx context.Context, role string, app tenant.Names, c *cluster.Cluster) error {
	if r := s.Recorder(); r != nil {
		return r.SetTenant(ctx, s.TenantFolder(role), app, c)
	}
	return nil
}

// TenantFolder is the folder name (under clusters/) of the tenant cluster the lane calls role.
func (s *TenantStream) TenantFolder(role string) string {
	if role == s.o.DefaultCluster {
		return Tenant
	}
	return Tenant + "-" + role
}

// Collect runs the on-failure collectors for pools (none: the cluster-wide ones only) inside
// the lane's diagnostics reserve and returns the evidence they name for a failure of class at
// stage. Before the start it runs none; after the interrupt it runs none and records them
// declined.
func (s *TenantStream) Collect(ctx context.Context, pools []tenant.PoolNames, class verdict.Class, stage string) []string {
	rec := s.Recorder()
	if rec == nil || s.Declined("on-failure collectors", verdict.Label(class, stage)) {
		return nil
	}
	if c := s.o.Budget.Clock; c != nil {
		dctx, cancel, _ := c.Diagnostics(ctx)
		defer cancel()
		ctx = dctx
	}
	return rec.Collect(ctx, CollectOptions{Budget: s.o.Budget, Pools: pools, Class: class, Stage: join.Stage(stage)}).Evidence
}

// Declined reports whether the suite was interrupted and, when it was, records collector name
// for scope as declined in the manifest: the run ends within its grace, so evidence is not
// gathered.
func (s *TenantStream) Declined(name, scope string) bool {
	if s == nil || s.o.Interrupt == nil || s.o.Interrupt.Err() == nil {
		return false
	}
	s.o.Manifest.Add(Entry{Name: name, Scope: scope, Process: s.o.Process, Start: time.Now(), Status: Declined,
		Error: context.Cause(s.o.Interrupt).Error() + ": the run ends within its grace, so evidence is not gathered"})
	return true
}

// Stop ends the streams, once they started.
func (s *TenantStream) Stop() {
	if r := s.Recorder(); r != nil {
		r.Stop()
	}
}
