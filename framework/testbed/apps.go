package testbed

import (
	"context"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// Pool is the pool named name.
func (t *Tenant) Pool(name string) (join.Pool, bool) {
	for _, p := range t.Pools {
		if p.Spec.Name == name {
			return p, true
		}
	}
	return join.Pool{}, false
}

// PoolsOf are the pools of conformance cluster a.
func (t *Tenant) PoolsOf(a *tenant.App) []join.Pool {
	var out []join.Pool
	for _, p := range t.Pools {
		if p.App == a {
			out = append(out, p)
		}
	}
	return out
}

// CreateCluster creates a Kubernetes app in the tenant; Teardown deletes it.
func (t *Tenant) CreateCluster(ctx context.Context, spec tenant.ClusterSpec) error {
	if err := t.Platform.CreateCluster(ctx, spec); err != nil {
		return err
	}
	t.mu.Lock()
	t.clusters = append(t.clusters, spec.Names)
	t.mu.Unlock()
	return nil
}

// Created reports whether the Tenant app, and the Kubernetes app of names, were created and
// not deleted since.
func (t *Tenant) Created(names tenant.Names) (tenantApp, app bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.clusters {
		if n == names {
			app = true
		}
	}
	return t.tenant, app
}

// Clusters are the Kubernetes apps created and not deleted since.
func (t *Tenant) Clusters() []tenant.Names {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]tenant.Names(nil), t.clusters...)
}

// forgetCluster and forgetTenant record a deletion made outside Teardown (the deletion spec).
func (t *Tenant) forgetCluster(names tenant.Names) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.clusters[:0]
	for _, n := range t.clusters {
		if n != names {
			out = append(out, n)
		}
	}
	t.clusters = out
}

func (t *Tenant) forgetTenant() {
	t.mu.Lock()
	t.tenant, t.deleted = false, true
	t.mu.Unlock()
}
