package diag

import (
	"context"
	"fmt"
	"sync"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// TenantStream is a suite's streaming diagnostics as a value the testbed is handed
// (testbed.Options.Diagnostics): the testbed starts it when the tenant namespace exists, names
// each pool's folder before its cluster is created and each tenant cluster once its control
// plane is up, and reads the run's consoles from it; the suite keeps it for the on-failure
// collectors (Recorder) and stops it at the end. It calls nothing back. Safe for concurrent
// use; its zero value is not usable, NewTenantStream makes one.
type TenantStream struct {
	artifacts  string
	manifest   *Manifest
	process    string
	management *cluster.Cluster
	// defaultCluster is the lane's name for its default conformance cluster, whose tenant
	// cluster is written under clusters/tenant/ (another's under clusters/tenant-<role>/).
	defaultCluster string

	mu  sync.Mutex
	rec *Recorder
}

// NewTenantStream is a stream not started yet, writing into the artifacts folder and recording
// its collectors in manifest as process; defaultCluster is the lane's default cluster's name.
func NewTenantStream(artifacts string, manifest *Manifest, process string, management *cluster.Cluster, defaultCluster string) *TenantStream {
	return &TenantStream{artifacts: artifacts, manifest: manifest, process: process, management: management, defaultCluster: defaultCluster}
}

// StartDiagnostics starts streaming the tenant namespace: events, the condition timeline and,
// for each pool given to WatchPool, its consoles.
func (s *TenantStream) StartDiagnostics(ctx context.Context, namespace string) error {
	a, err := NewArtifacts(s.artifacts, NewRedactor(), 0)
	if err != nil {
		return err
	}
	rec, err := Start(ctx, Options{Artifacts: a, Manifest: s.manifest, Process: s.process, Management: s.management, Namespace: namespace})
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
	if role == s.defaultCluster {
		return Tenant
	}
	return Tenant + "-" + role
}

// Stop ends the streams, once they started.
func (s *TenantStream) Stop() {
	if r := s.Recorder(); r != nil {
		r.Stop()
	}
}
