package world

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// Options configure the management cluster.
type Options struct {
	Tools controlplane.Tools
	// Dir is the world's working folder (certificates, logs, etcd data); it must exist.
	Dir string
	// Nodes are the management Nodes kwok plays (default: DefaultNodes).
	Nodes []NodeSpec
	// ServiceCIDR is the management Service range (default 10.96.0.0/16).
	ServiceCIDR string
	// Users are token users of the management apiserver besides the admin.
	Users []controlplane.User
	// DNSService creates the management cluster's CoreDNS Service (kube-system/kube-dns), as
	// the platform has one; tests that play a tenant on the management apiserver leave it out.
	DNSService bool
	// HostJobs leaves kwok's pod-complete stage out: a Job's pod stays Running for a stand-in
	// that runs its containers (internal/sim/hostjobs) instead of ending Succeeded at once.
	HostJobs bool
	// Replaced names fixture CRDs the world does not install because a real upstream component
	// brings its own from its module (CAPK's and the Talos bootstrap provider's, which the sim
	// substrate installs before Run).
	Replaced []string
	// AlsoInstall, when set, installs what else the management cluster must hold before its
	// manager is built (the upstream components' CRDs); it runs beside the fixture CRDs'
	// installation, which the apiserver then establishes together.
	AlsoInstall func(context.Context, *cluster.Cluster) error
	// APIServerArgs are appended to the management kube-apiserver's flags (the sim's audit
	// log: internal/substrate/simulated AuditArgs).
	APIServerArgs []string
	// AdvertiseAddress, when set, is this host's address the management apiserver also listens
	// on and advertises as the kubernetes Service's endpoint: the real Node's pods reach it there.
	AdvertiseAddress string
	// Log receives progress lines for people; nil discards them.
	Log io.Writer
}

// World is a running management cluster. Stop it with Stop.
type World struct {
	opts    Options
	Etcd    *controlplane.Etcd
	API     *controlplane.APIServer
	procs   []*controlplane.Process
	Cluster *cluster.Cluster

	mgr      ctrl.Manager
	webhooks *webhookServing
	// standinValidating and standinMutating are the stand-ins' admission webhooks, installed
	// by Run.
	standinValidating []admissionv1.ValidatingWebhook
	standinMutating   []admissionv1.MutatingWebhook
	logs              *logSink

	life    context.Context
	mu      sync.Mutex
	cancel  context.CancelFunc
	running bool
	done    chan error
	stopped bool
	onStop  []func()
}

// Start brings the management cluster up to the point where reconcilers can be added: the
// processes run, every fixture CRD is established, the management Nodes are Ready and the
// manager with the Cluster API controllers and webhooks is built (not started; see Run).
// On error everything started so far is stopped.
func Start(ctx context.Context, o Options) (_ *World, err error) {
	if o.Dir == "" {
		return nil, errors.New("world: Options.Dir is empty")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if len(o.Nodes) == 0 {
		o.Nodes = DefaultNodes()
	}
	// The manager, the controllers' setup and the ClusterCache live as long as the world, not
	// as long as the call that starts it.
	life, cancel := context.WithCancel(context.Background())
	w := &World{opts: o, life: life, cancel: cancel}
	defer func() {
		if err != nil {
			w.Stop()
		}
	}()
	start := time.Now()
	if err := w.startControlPlane(ctx, start); err != nil {
		return nil, err
	}
	if err := w.establishCRDs(ctx); err != nil {
		return nil, err
	}
	if err := w.startComponents(ctx); err != nil {
		return nil, err
	}
	if w.logs, err = newLogSink(w.Cluster, mkdir(o.Dir, "container-logs")); err != nil {
		return nil, err
	}
	if err := createNodes(ctx, w.Cluster, o.Nodes); err != nil {
		return nil, err
	}
	if o.DNSService {
		serviceCIDR := o.ServiceCIDR
		if serviceCIDR == "" {
			serviceCIDR = "10.96.0.0/16" // the apiserver's default here (controlplane.StartAPIServer)
		}
		if err := createDNSService(ctx, w.Cluster, serviceCIDR); err != nil {
			return nil, err
		}
	}
	if w.mgr, err = newManager(life, w.API.Admin(), w.webhooks, controllerLogger(filepath.Join(o.Dir, "controllers.log"))); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "sim: management cluster up in %s\n", since(start))
	return w, nil
}

// startControlPlane starts the management etcd and kube-apiserver (each kept for Stop as soon as
// it runs), says how long since start they took, and makes the admin's cluster client.
func (w *World) startControlPlane(ctx context.Context, start time.Time) error {
	o := w.opts
	var err error
	if w.Etcd, err = controlplane.StartEtcd(ctx, o.Tools, mkdir(o.Dir, "etcd")); err != nil {
		return err
	}
	w.procs = append(w.procs, &w.Etcd.Process)
	w.API, err = controlplane.StartAPIServer(ctx, o.Tools, controlplane.APIServerOptions{
		Name: "management", Dir: mkdir(o.Dir, "apiserver"), EtcdURL: w.Etcd.ClientURL,
		EtcdPrefix: "/management", ServiceCIDR: o.ServiceCIDR, Users: o.Users, ExtraArgs: o.APIServerArgs,
		AdvertiseAddress: o.AdvertiseAddress,
	})
	if err != nil {
		return err
	}
	w.procs = append(w.procs, &w.API.Process)
	fmt.Fprintf(o.Log, "sim: management etcd and kube-apiserver ready in %s\n", since(start))
	if w.Cluster, err = cluster.New("management", w.API.Admin()); err != nil {
		return err
	}
	w.Cluster.KubeconfigPath = w.API.AdminKubeconfig
	return nil
}

// establishCRDs makes the webhook server's address, then installs the fixture CRDs (naming it)
// and, beside them, what Options.AlsoInstall installs, and waits for both.
func (w *World) establishCRDs(ctx context.Context) error {
	o := w.opts
	var err error
	// The webhook server's address must be known before the CRDs name it.
	if w.webhooks, err = newWebhookServing(mkdir(o.Dir, "webhooks")); err != nil {
		return err
	}
	t := time.Now()
	also := make(chan error, 1)
	go func() {
		if o.AlsoInstall == nil {
			also <- nil
			return
		}
		also <- o.AlsoInstall(ctx, w.Cluster)
	}()
	err = installCRDs(ctx, w.Cluster, w.webhooks, o.Replaced)
	if alsoErr := <-also; err == nil {
		err = alsoErr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "sim: CRDs established in %s\n", since(t))
	return nil
}

func (w *World) startComponents(ctx context.Context) error {
	dir := mkdir(w.opts.Dir, "components")
	kcm, err := controlplane.StartControllerManager(ctx, w.opts.Tools, w.API, controlplane.ControllerManagerOptions{
		Dir: dir,
		// No cloud, no node IPAM, no attach or expansion: the sim has no real nodes or disks. The
		// volume binder stays: it binds the DataVolume claims to the volumes the CDI stand-in
		// provisions, as it does behind a CSI provisioner.
		Controllers: "*,-nodeipam,-attachdetach,-persistentvolume-expander,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
		// The binder's periodic sync stays at its default (15 s: kubernetes v1.35.4
		// pkg/controller/volume/persistentvolume/config/v1alpha1/defaults.go:38-39): a volume
		// provisioned with its claim's UID in claimRef, as the sim's provisioner writes it, has
		// its claim queued for binding the moment it appears (pv_controller.go:700-716).
	})
	if err != nil {
		return err
	}
	w.procs = append(w.procs, kcm)
	sched, err := controlplane.StartScheduler(ctx, w.opts.Tools, w.API, dir)
	if err != nil {
		return err
	}
	w.procs = append(w.procs, sched)
	kw, err := startKwok(ctx, w.opts.Tools, w.API, mkdir(w.opts.Dir, "kwok"), w.opts.HostJobs)
	if err != nil {
		return err
	}
	w.procs = append(w.procs, kw)
	return nil
}

// Manager is the controller-runtime manager the Cluster API controllers run in; stand-ins add
// their reconcilers to it before Run.
func (w *World) Manager() ctrl.Manager { return w.mgr }

// Tools is the control plane binaries folder, for stand-ins that start processes.
func (w *World) Tools() controlplane.Tools { return w.opts.Tools }

// Dir is the world's working folder.
func (w *World) Dir() string { return w.opts.Dir }

// Log is where progress lines for people go.
func (w *World) Log() io.Writer { return w.opts.Log }

// OnStop registers f to run when the world stops, beside the other hooks and before the
// world's own processes (stand-ins stop the processes they started this way, within
// StopGrace).
func (w *World) OnStop(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onStop = append(w.onStop, f)
}

// Run starts the manager in the background and waits until its caches are synced and its
// webhooks answer; then it installs the admission webhook configurations. The manager runs
// until Stop; an error it returns later is reported by Err.
func (w *World) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("world: Run called twice")
	}
	w.running, w.done = true, make(chan error, 1)
	w.mu.Unlock()
	go func() { w.done <- w.mgr.Start(w.life) }()
	t := time.Now()
	if err := w.waitManager(ctx); err != nil {
		return err
	}
	if err := installAdmissionWebhooks(ctx, w.Cluster, w.webhooks); err != nil {
		return err
	}
	if err := w.installStandinWebhooks(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w.opts.Log, "sim: Cluster API controllers and webhooks running in %s\n", since(t))
	return nil
}

func (w *World) waitManager(ctx context.Context) error {
	synced := make(chan bool, 1)
	go func() { synced <- w.mgr.GetCache().WaitForCacheSync(ctx) }()
	select {
	case ok := <-synced:
		if !ok {
			return fmt.Errorf("world: the manager's caches did not sync (%w)", ctx.Err())
		}
	case err := <-w.done:
		return fmt.Errorf("world: the controller manager stopped at start: %w", err)
	}
	return w.webhooks.waitServing(ctx)
}

// ContainerLog implements simenv.LogSink: the file whose content `kubectl logs` returns for
// container of pod namespace/pod on a management Node. Stand-ins append CRI-format lines to it
// (simenv.WriteContainerLog).
func (w *World) ContainerLog(namespace, pod, container string) (string, error) {
	return w.logs.ContainerLog(context.Background(), namespace, pod, container)
}

// Pids lists the process ids of every process the world runs (tenant ones stop via OnStop).
func (w *World) Pids() []int {
	var out []int
	for _, p := range w.procs {
		if pid := p.Pid(); pid != 0 {
			out = append(out, pid)
		}
	}
	return out
}

// StopGrace is how long a process of a stopping world has to exit after SIGTERM before it is
// killed: whatever a graceful exit would finish (a kube-apiserver's takes over a second, a
// tenant's more than 5 s) goes with the world.
const StopGrace = time.Second

// Stop stops the manager, runs the OnStop hooks together, then stops every process (etcd
// last), and says how long each part took. It is idempotent and safe on a partly started world.
func (w *World) Stop() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	cancel, done, hooks, running := w.cancel, w.done, w.onStop, w.running
	w.mu.Unlock()
	start := time.Now()
	cancel()
	// The manager goes first, so no reconcile starts what the hooks below stop. Its webhook
	// server's shutdown takes about a second (net/http gives an HTTP/2 client that long to
	// leave after GOAWAY); a reconcile still running past the bound is left behind.
	if running {
		select {
		case <-done:
		case <-time.After(managerStopGrace):
			fmt.Fprintf(w.opts.Log, "sim: the controller manager did not stop within %s (a reconcile still runs; controllers.log says which); going on\n", managerStopGrace)
		}
	}
	mgr := since(start)
	t := time.Now()
	var wg sync.WaitGroup
	for _, h := range hooks {
		wg.Add(1)
		go func() { defer wg.Done(); h() }()
	}
	wg.Wait()
	standins := since(t)
	t = time.Now()
	// The apiserver and its clients first, etcd last: etcd stopping first makes every other
	// process log errors until it is killed.
	for i := len(w.procs) - 1; i >= 1; i-- {
		wg.Add(1)
		go func(p *controlplane.Process) { defer wg.Done(); p.Stop(StopGrace) }(w.procs[i])
	}
	wg.Wait()
	if len(w.procs) > 0 {
		w.procs[0].Stop(StopGrace)
	}
	if w.webhooks != nil {
		w.webhooks.close()
	}
	fmt.Fprintf(w.opts.Log, "sim: stopped in %s (controller manager %s, stand-ins and upstream controllers %s, processes %s)\n",
		since(start), mgr, standins, since(t))
}

func mkdir(parent, name string) string {
	p := filepath.Join(parent, name)
	_ = os.MkdirAll(p, 0o700)
	return p
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }
