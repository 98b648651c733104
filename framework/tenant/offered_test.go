package tenant_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/sim/platform"
	"github.com/cozystack/cozy-e2e/internal/testkit"
	"github.com/cozystack/cozy-e2e/internal/testkit/tenantenv"
)

// The installed platform's ApplicationDefinition says the tenant versions it offers; a lane
// cluster at another is refused naming the cluster, the offer and the revision the lane was held
// to. With no definition, the error names it.
func testTheInstalledPlatformSaysTheVersionsItOffers(t *testing.T, env *tenantenv.Env) {
	ctx := testkit.Context(t, time.Minute)
	p := tenant.Platform{Mgmt: env.Cluster}
	if _, err := p.OfferedVersions(ctx); err == nil || !strings.Contains(err.Error(), "the installed platform's ApplicationDefinition kubernetes (cozystack.io/v1alpha1)") {
		t.Fatalf("no definition: %v", err)
	}
	schema := `{"title":"Chart Values","type":"object","properties":{"version":{"description":"Kubernetes major.minor version to deploy","type":"string","default":"v1.36","enum":["v1.36","v1.35"]}}}`
	if err := platform.PublishKubernetesDefinition(ctx, env.Cluster.Client, []byte(schema)); err != nil {
		t.Fatal(err)
	}
	offered, err := p.OfferedVersions(ctx)
	if err != nil || strings.Join(offered, ",") != "v1.36,v1.35" {
		t.Fatalf("offered %v, %v; want v1.36, v1.35", offered, err)
	}
	l, err := lane.Load(filepath.Join("..", "..", "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	err = tenant.CheckOffered(l, offered)
	want := "sim.yaml: cluster pools at v1.34: the installed platform offers tenant Kubernetes v1.36, v1.35 (its ApplicationDefinition kubernetes), not what lanes-check held the lane to (cozystack v1.6.1 offers"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want %q, got %v", want, err)
	}
	if err := tenant.CheckOffered(l, []string{"v1.35", "v1.34"}); err != nil {
		t.Fatalf("a platform offering the lane's versions: %v", err)
	}
}
