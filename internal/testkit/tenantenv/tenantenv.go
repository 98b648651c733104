// Package tenantenv starts a real local apiserver serving the fixture CRDs (the platform's,
// Cluster API's and the providers' kinds) for the tests of packages that read and write them,
// behind the cozystack-api stand-in, so the platform's apps are views of their HelmReleases as on
// a real platform. Conversion webhooks are dropped: tests write and read each kind at one version.
package tenantenv

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cozystack/cozy-e2e/fixtures"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/cozyapi"
)

// Env is one apiserver with the fixture CRDs established.
type Env struct {
	API     *controlplane.APIServer
	Cluster *cluster.Cluster
}

// Start starts etcd and kube-apiserver (stopped when t ends), installs every fixture CRD and
// waits until each is established. Users are token users besides the admin.
func Start(t testing.TB, users ...controlplane.User) *Env {
	t.Helper()
	api := cptest.APIServer(t, controlplane.APIServerOptions{Users: users})
	c, err := cluster.New("test", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crds, err := fixtures.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range crds {
		crd := f.CRD.DeepCopy()
		crd.Spec.Conversion = nil
		if err := c.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: %v", f.File, err)
		}
	}
	for _, f := range crds {
		cptest.Established(ctx, t, c.Client, f.CRD.Name, time.Minute)
	}
	front, err := cozyapi.StartFront(api)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	admin, err := api.UserConfig("admin")
	if err != nil {
		t.Fatal(err)
	}
	// A fresh client, so its discovery sees the new kinds; through the front.
	if c, err = cluster.New("test", front.Config(admin.BearerToken)); err != nil {
		t.Fatal(err)
	}
	return &Env{API: api, Cluster: c}
}
