package sim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/controlplane"
	"github.com/cozystack/cozy-e2e/framework/sim/upstream"
	"github.com/cozystack/cozy-e2e/framework/sim/world"
)

// realControllers are the upstream controllers every sim run runs as processes next to the
// management control plane: CAPK v0.1.10 (KubevirtCluster, KubevirtMachine: the VMs, their
// userdata Secrets, providerIDs, the providerID on the tenant Node) and the Talos bootstrap
// provider v0.6.12 (TalosConfig: the bootstrap data). Their CRDs come from their modules, not
// from fixtures/crds: the world leaves its copies out (world.Options.Replaced) and the CRDs are
// installed before the world's manager starts, since stand-ins watch KubevirtMachines. The
// processes start once the Cluster API webhooks answer (they read Cluster API at v1beta1
// through its conversion webhook) and stop with the world, before its apiserver.
type realControllers struct {
	b                   *upstream.Build
	dir                 string
	capkCRDs, cabptCRDs []upstream.CRD
	cabptHook           *upstream.Serving
	mu                  sync.Mutex
	running             []*upstream.Controller
}

// newRealControllers finds what `make tools` built and reads the controllers' CRDs; the Talos
// provider's webhook identity is made now, because its CRDs name its conversion endpoint.
func newRealControllers(tools controlplane.Tools, dir string) (*realControllers, error) {
	b, err := upstream.Find(tools)
	if err != nil {
		return nil, err
	}
	r := &realControllers{b: b, dir: dir}
	if r.capkCRDs, err = b.CAPKCRDs(); err != nil {
		return nil, err
	}
	if r.cabptCRDs, err = b.CABPTCRDs(); err != nil {
		return nil, err
	}
	if r.cabptHook, err = upstream.NewServing(filepath.Join(dir, "cabpt", "webhook-certs"), "cabpt"); err != nil {
		return nil, err
	}
	return r, nil
}

// replaced names the fixture CRDs these controllers bring their own of.
func (r *realControllers) replaced() []string {
	var out []string
	for _, c := range append(append([]upstream.CRD{}, r.capkCRDs...), r.cabptCRDs...) {
		out = append(out, c.CRD.Name)
	}
	return out
}

// installCRDs installs the controllers' own CRDs (CABPT's converting through its webhook).
func (r *realControllers) installCRDs(ctx context.Context, c *cluster.Cluster) error {
	if err := upstream.InstallCRDs(ctx, c, r.capkCRDs, nil); err != nil {
		return err
	}
	return upstream.InstallCRDs(ctx, c, r.cabptCRDs, r.cabptHook.Conversion())
}

// start runs CAPK and CABPT against w's apiserver (its admin kubeconfig, not the harness's
// proxy: the apiserver-transient fault is the harness's, not the controllers') and stops them
// when w stops.
func (r *realControllers) start(ctx context.Context, w *world.World) error {
	steps := []struct {
		name  string
		start func(context.Context, *upstream.Build, *cluster.Cluster, upstream.Options) (*upstream.Controller, error)
		hook  *upstream.Serving
	}{
		{"capk", upstream.StartCAPK, nil},
		{"cabpt", upstream.StartCABPT, r.cabptHook},
	}
	// Both at once: each waits for its own readiness.
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, s := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctl, err := s.start(ctx, r.b, w.Cluster, upstream.Options{
				Dir: filepath.Join(r.dir, s.name), Kubeconfig: w.API.AdminKubeconfig, Webhook: s.hook, CRDsInstalled: true,
			})
			if err != nil {
				errs[i] = fmt.Errorf("sim: %w", err)
				return
			}
			r.mu.Lock()
			r.running = append(r.running, ctl)
			r.mu.Unlock()
			w.OnStop(func() { ctl.Stop(5 * time.Second) })
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// summary is one line for people: each controller and how soon it was ready.
func (r *realControllers) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := ""
	for _, c := range r.running {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s ready in %s", c.Name, c.Ready.Round(time.Millisecond))
	}
	return s
}

// pids are the running controllers' process ids.
func (r *realControllers) pids() []int {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, c := range r.running {
		if pid := c.Pid(); pid != 0 {
			out = append(out, pid)
		}
	}
	return out
}
