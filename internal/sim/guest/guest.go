// Package guest stands in for the operating system inside a worker VM. Once a VMI runs, the
// guest reads its bootstrap data (the cloud-init ConfigDrive Secret CAPK wrote), writes its boot to
// the serial console (the launcher's guest-console-log container; Talos or Kairos lines with
// guest-relative stamps), then joins the tenant cluster: a Node named as the data says (the VMI's
// name unless told otherwise), kubelet version from the data, managed by the tenant's kwok so it
// goes Ready. A Talos guest joins with nothing but its machine configuration: its kubelet's TLS
// bootstrap goes to the configured endpoint (through the sim's stand-in for the pod network),
// trusts the configured cluster CA, presents the configured bootstrap token, and registers the
// Node with the certificate the tenant signs; whatever of that the tenant refuses, no Node
// registers. A kubeadm (Kairos) join is modelled: it reads the tenant's kube-system/kubelet-config
// and registers through the Cluster API kubeconfig. A VMI being deleted powers its guest down on
// the console.
//
// Faults: guest-join-rejected (the control plane refuses the kubelet's bootstrap credentials: no
// Node; on a Talos pool the kubelet presents a token the tenant does not hold and the tenant
// refuses it, a kubeadm join says so on the console, a Talos guest does not), provider-id-missing (the
// Node carries a name of its own and no providerID), node-not-ready (the kubelet reports
// Ready=False), node-tainted (a NoSchedule taint that stays), cluster-dns-mismatch (observed
// when the kubeadm join reads a clusterDNS no CoreDNS holds), mhc-replacement (the first Machine
// of a pool stalls at boot, so its MachineHealthCheck replaces it; the replacement boots).
package guest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

// Latency names this package reads from simenv.Env.
const (
	LatencyBoot = "boot"
	LatencyJoin = "join"
)

// Setup registers the guest on mgr; guests stop with the manager.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	base, stop := context.WithCancel(context.Background())
	g := &guests{c: mgr.GetClient(), env: env, tenants: &standin.Tenants{}, base: base,
		running: map[types.UID]*guest{}, stalled: map[string]string{}}
	// Guests live as long as the manager.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		stop()
		return nil
	})); err != nil {
		stop()
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("sim-guest").
		For(&kubevirtv1.VirtualMachineInstance{}).
		Complete(g)
}

// guests are the running guests, one per VMI.
type guests struct {
	c       client.Client
	env     *simenv.Env
	tenants *standin.Tenants
	base    context.Context

	mu      sync.Mutex
	logMu   sync.Mutex
	running map[types.UID]*guest
	// stalled is the Machine that stalls at boot, per pool, under mhc-replacement.
	stalled map[string]string
}

func (g *guests) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := g.c.Get(ctx, req.NamespacedName, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			g.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gu, booted := g.running[vmi.UID]
	if vmi.DeletionTimestamp != nil {
		if booted {
			gu.powerDown()
		}
		return ctrl.Result{}, nil
	}
	if vmi.IsFinal() {
		// The domain is gone (it crashed, or its launcher did): the guest stops where it was.
		if booted {
			gu.stop()
		}
		return ctrl.Result{}, nil
	}
	if booted || vmi.Status.Phase != kubevirtv1.Running {
		return ctrl.Result{}, nil
	}
	gu = &guest{g: g, vmi: vmi.DeepCopy(), done: make(chan struct{})}
	bootCtx, cancel := context.WithCancel(g.base)
	gu.cancel = cancel
	g.running[vmi.UID] = gu
	go gu.run(bootCtx)
	return ctrl.Result{}, nil
}

// forget stops the guests of a VMI that is gone.
func (g *guests) forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for uid, gu := range g.running {
		if gu.vmi.Namespace == key.Namespace && gu.vmi.Name == key.Name {
			gu.cancel()
			g.env.Serial.Hangup(key.Namespace, key.Name, string(uid))
			delete(g.running, uid)
		}
	}
}

// claimStall reports whether machine is the one of its pool that stalls at boot.
func (g *guests) claimStall(pool standin.Pool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := pool.Namespace + "/" + pool.Cluster + "/" + pool.Name
	if m, ok := g.stalled[key]; ok {
		return m == pool.Machine
	}
	g.stalled[key] = pool.Machine
	return true
}

// logf appends a line to the sim's guest log (simenv.Env.GuestLogPath, which the sim substrate
// copies into the run's artifacts): what a guest could not do that no console shows and no fault
// explains. Error texts only: never a token, a key or the guest's data.
func (g *guests) logf(format string, args ...any) {
	if g.env.Dir == "" {
		return
	}
	g.logMu.Lock()
	defer g.logMu.Unlock()
	f, err := os.OpenFile(g.env.GuestLogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s "+format+"\n", append([]any{g.env.Now().UTC().Format(time.RFC3339Nano)}, args...)...)
}
