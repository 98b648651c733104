package diag

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// The testbed may hand a pool or a tenant cluster to a stream that never started (its namespace
// was refused): nothing is streamed and nothing fails; and each tenant cluster has a folder of
// its own, the default cluster's the plain one report.Write and summary.md read.
func TestTenantStreamBeforeItStarted(t *testing.T) {
	s := NewTenantStream(TenantStreamOptions{Artifacts: t.TempDir(), Manifest: NewManifest(), Process: "suite kubernetes", DefaultCluster: "default"})
	if s.Recorder() != nil || s.Consoles() != nil {
		t.Fatalf("a stream not started has a recorder %v or consoles %v", s.Recorder(), s.Consoles())
	}
	s.WatchPool(tenant.PoolNames{})
	if err := s.WatchTenant(context.Background(), "default", tenant.Names{}, nil); err != nil {
		t.Errorf("WatchTenant before the start: %v, want nothing done", err)
	}
	if ev := s.Collect(context.Background(), nil, verdict.Teardown, "teardown"); ev != nil {
		t.Errorf("Collect before the start named %q, want nothing", ev)
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

// Once the suite is interrupted, the stream gathers no evidence and records each collector it
// declined, with the signal, in the manifest.
func TestTenantStreamDeclinesAfterTheInterrupt(t *testing.T) {
	interrupt, cancel := context.WithCancelCause(context.Background())
	m := NewManifest()
	s := NewTenantStream(TenantStreamOptions{Artifacts: t.TempDir(), Manifest: m, Process: "suite kubernetes", Interrupt: interrupt})
	if s.Declined("cluster tree", "cluster c") {
		t.Fatal("declined before the interrupt")
	}
	cancel(errors.New("interrupted by SIGINT"))
	if !s.Declined("cluster tree", "cluster c") {
		t.Fatal("not declined after the interrupt")
	}
	e := m.Entries()
	if len(e) != 1 || e[0].Status != Declined || e[0].Process != "suite kubernetes" || !strings.Contains(e[0].Error, "SIGINT") {
		t.Errorf("manifest after one declined collector: %+v", e)
	}
}
