package simulated

import (
	"context"
	"fmt"
	"io"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
)

// injectControllerFaults arms controller-killed and controller-crashloop: once the first
// VirtualMachine of the run exists (the pools are mid-join: the real virt-controller is about
// to make its launcher, CDI its importer), each named controller is killed once, or made to
// exit at every start from then on. Each injection is an observation of the run.
func (r *realControllers) injectControllerFaults(w *world.World, env *simenv.Env, log io.Writer) {
	kill, crash := env.Faults.Targets(faults.ControllerKilled), env.Faults.Targets(faults.ControllerCrashLoop)
	if len(kill)+len(crash) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.OnStop(cancel)
	go func() {
		if !firstVirtualMachine(ctx, w) {
			return
		}
		for _, name := range kill {
			r.inject(env, log, faults.ControllerKilled, name)
		}
		for _, name := range crash {
			r.inject(env, log, faults.ControllerCrashLoop, name)
		}
	}()
}

// inject applies one controller fault and records it.
func (r *realControllers) inject(env *simenv.Env, log io.Writer, f faults.Name, name string) {
	sup, err := r.supervisor(name)
	if err == nil {
		if f == faults.ControllerCrashLoop {
			err = sup.CrashLoop()
		} else {
			err = sup.Kill()
		}
	}
	if err != nil {
		fmt.Fprintf(log, "sim: fault %s@%s not injected: %v\n", f, name, err)
		return
	}
	detail := "SIGKILL sent once; its supervisor restarts it"
	if f == faults.ControllerCrashLoop {
		detail = "SIGKILL sent; every start from now on exits 2"
	}
	fmt.Fprintf(log, "%s sim: fault %s@%s: %s\n", time.Now().UTC().Format("15:04:05.000"), f, name, detail)
	_ = env.Observe(simenv.Observation{Fault: f, Object: "process " + sup.Name(), Detail: detail})
}

// firstVirtualMachine waits until a VirtualMachine exists on the management cluster (true) or
// the world stops (false), looking twice a second.
func firstVirtualMachine(ctx context.Context, w *world.World) bool {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		var vms kubevirtv1.VirtualMachineList
		if err := w.Cluster.Client.List(ctx, &vms); err == nil && len(vms.Items) > 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}
