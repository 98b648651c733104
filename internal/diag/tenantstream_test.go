package diag

import (
	"context"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// The testbed may hand a pool or a tenant cluster to a stream that never started (its namespace
// was refused): nothing is streamed and nothing fails; and each tenant cluster has a folder of
// its own, the default cluster's the plain one report.Write and summary.md read.
func TestTenantStreamBeforeItStarted(t *testing.T) {
	s := NewTenantStream(t.TempDir(), NewManifest(), "suite kubernetes", nil, "default")
	if s.Recorder() != nil || s.Consoles() != nil {
		t.Fatalf("a stream not started has a recorder %v or consoles %v", s.Recorder(), s.Consoles())
	}
	s.WatchPool(tenant.PoolNames{})
	if err := s.WatchTenant(context.Background(), "default", tenant.Names{}, nil); err != nil {
		t.Errorf("WatchTenant before the start: %v, want nothing done", err)
	}
	s.Stop()
	var none *TenantStream // a Suite made without Setup holds none
	none.WatchPool(tenant.PoolNames{})
	none.Stop()
	if none.Consoles() != nil {
		t.Error("a nil stream has consoles")
	}
	for role, want := range map[string]string{"default": Tenant, "upgrade": Tenant + "-upgrade"} {
		if got := s.TenantFolder(role); got != want {
			t.Errorf("TenantFolder(%q) = %q, want %q", role, got, want)
		}
	}
}
