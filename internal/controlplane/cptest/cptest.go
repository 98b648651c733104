// Package cptest starts a real local control plane for tests.
package cptest

import (
	"context"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// Tools finds the binaries `make tools` builds. When they are missing the test fails under
// CI (CI set), so a broken tools step can never turn into a green run of skips; elsewhere it
// skips, saying how to build them.
func Tools(t testing.TB) controlplane.Tools {
	t.Helper()
	tools, err := controlplane.FindTools()
	if err != nil {
		testkit.Unavailable(t, err)
	}
	return tools
}

// APIServer starts etcd and one kube-apiserver in a temporary folder, stopped when t ends.
func APIServer(t testing.TB, opts controlplane.APIServerOptions) *controlplane.APIServer {
	t.Helper()
	tools := Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	etcd, err := controlplane.StartEtcd(ctx, tools, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Stop(5 * time.Second) })
	if opts.Name == "" {
		opts.Name = "test"
	}
	opts.Dir, opts.EtcdURL = dir, etcd.ClientURL
	api, err := controlplane.StartAPIServer(ctx, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Stop(10 * time.Second) })
	return api
}
