package simtest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
)

// VirtController runs KubeVirt's real virt-controller against e's apiserver as the sim
// substrate does: KubeVirt's CRDs as virt-operator installs them for the platform's KubeVirt CR
// (in place of the fixtures' VirtualMachine and VirtualMachineInstance), the CDI kinds it
// informs on, and the process, stopped when t ends. It needs what `make tools` builds: missing,
// the test fails under CI (CI set) and is skipped elsewhere, saying so. e's client is renewed
// to see the new kinds.
func (e *Env) VirtController(t testing.TB) *realupstream.Controller {
	t.Helper()
	b := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kv, err := b.KubeVirtInstall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cdi, err := b.VirtControllerCDICRDs()
	if err != nil {
		t.Fatal(err)
	}
	if err := realupstream.InstallCRDs(ctx, e.Cluster, append(kv.CRDs, cdi...), nil); err != nil {
		t.Fatal(err)
	}
	ctl, err := realupstream.StartVirtController(ctx, b, e.Cluster, kv, realupstream.Options{
		Dir: filepath.Join(e.Dir, "virt-controller"), Kubeconfig: e.API.AdminKubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Stop(5 * time.Second) })
	if e.Cluster, err = cluster.New("management", e.API.Admin()); err != nil {
		t.Fatal(err)
	}
	return ctl
}
