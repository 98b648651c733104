package existing

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

func kindLane(t *testing.T) *lane.Lane {
	l, err := lane.Load(filepath.Join("..", "..", "..", "lanes", "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestPreflightNamesAMissingOrSilentCluster(t *testing.T) {
	ctx := context.Background()
	for kubeconfig, want := range map[string]string{
		"":                     "KUBECONFIG is not set",
		"/nonexistent/kubecfg": "KUBECONFIG /nonexistent/kubecfg: stat",
	} {
		s, err := New(kindLane(t), Options{Kubeconfig: kubeconfig})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Preflight(ctx)
		var pe *substrate.PreflightError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", kubeconfig, want, err)
		}
	}
}

// Against a live apiserver the preflight passes; E2E_FROM_PHASE past the install records the
// cluster, components and platform phases as skipped and hands the cluster over.
func TestFromPhaseSkipsTheInstallGates(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "existing"})
	l := kindLane(t)
	s, err := New(l, Options{Kubeconfig: api.AdminKubeconfig, FromPhase: "tenant"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Preflight(ctx); err != nil {
		t.Fatal(err)
	}
	clock := budget.New(l.Budget, budget.Options{Lane: l.Name})
	c, err := s.Up(ctx, clock)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil || c.TenantConfig == nil {
		t.Fatal("no cluster, or no tenant access, handed over")
	}
	var got []string
	for _, p := range clock.Timings().Phases {
		got = append(got, p.Name+"="+string(p.Outcome))
	}
	if strings.Join(got, " ") != "cluster=skipped components=skipped platform=skipped" {
		t.Fatalf("phases: %v", got)
	}
	if err := s.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := New(l, Options{FromPhase: "nope"}); err == nil {
		t.Fatal("an unknown phase accepted")
	}
}
