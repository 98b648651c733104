// Package simulated is the sim substrate, built from the pieces under internal/sim: a real local management cluster (internal/sim/world) with
// the real Cluster API controllers in process, the real CAPK, Talos bootstrap provider and Flux
// helm-controller as processes beside it (internal/sim/realupstream, built by `make tools`), the
// Cozystack v1.6.1 Kubernetes chart published for helm-controller, which renders the apps whose
// pools all run Talos (its Jobs run on the host: internal/sim/hostjobs), the platform stand-in
// (the Tenants, and its model of #4911 for the other Kubernetes apps), the Kamaji and
// cert-manager stand-ins, and whatever other stand-ins are added before Up; faults from
// E2E_SIM_FAULT. The harness reaches the management
// apiserver through a TLS-terminating proxy that passes tokens through and, under the
// apiserver-transient fault, answers some requests 500 "etcdserver: leader changed".
package simulated

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/sim/certmanager"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/hostjobs"
	"github.com/cozystack/cozy-e2e/internal/sim/kamaji"
	"github.com/cozystack/cozy-e2e/internal/sim/platform"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// StandIn registers one stand-in (the Kairos bootstrap provider, KubeVirt, CDI, the guest) on the
// management manager before it starts. The world gives the tools, the logs sink and OnStop.
type StandIn func(mgr ctrl.Manager, w *world.World, env *simenv.Env) error

// PhaseCluster is the lane phase Up runs in.
const PhaseCluster = "cluster"

// Substrate is the sim substrate. Build it with New.
type Substrate struct {
	lane     *lane.Lane
	o        substrate.Options
	env      *simenv.Env
	canary   string
	standIns []StandIn
	health   platform.HealthTimers
	// talos changes what a real Node's Talos pools are given (nil: the world has no real Node).
	talos  *talosTemplates
	dir    string
	ownDir bool

	mu      sync.Mutex
	w       *world.World
	k       *kamaji.Kamaji
	real    *realControllers
	px      *proxy
	kubecfg string
	down    bool
}

var (
	_ substrate.Substrate = (*Substrate)(nil)
	_ substrate.Access    = (*Substrate)(nil)
)

// New builds the sim substrate for lane l: E2E_SIM_FAULT selects faults (an unknown name is an
// error listing the catalogue), E2E_SIM_CANARY sets the canary (random when unset), the lane's
// sim.latencies set the stand-ins' latencies.
func New(l *lane.Lane, o substrate.Options) (*Substrate, error) {
	set, err := faults.Parse(os.Getenv("E2E_SIM_FAULT"))
	if err != nil {
		return nil, err
	}
	canary := os.Getenv("E2E_SIM_CANARY")
	if canary == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		canary = "sim-canary-" + hex.EncodeToString(b)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	s := &Substrate{lane: l, o: o, canary: canary, health: healthTimers(l)}
	lat := map[string]time.Duration{}
	if l.Sim != nil {
		for k, v := range l.Sim.Latencies {
			lat[k] = v.D()
		}
	}
	s.env = &simenv.Env{Faults: set, Latencies: lat, Serial: &simenv.SerialPorts{}, Now: time.Now}
	return s, nil
}

// healthTimers are the MachineHealthCheck values the sim renders: the pinned chart's
// (maxUnhealthy 50%, nodeStartupTimeout 10m), or the lane's sim.machineHealthCheck, as an app's
// nodeHealthCheck values would set them (a lane for the mhc-replacement fault shortens them so
// a stalled Machine is replaced within a run, and one-machine pools too).
func healthTimers(l *lane.Lane) platform.HealthTimers {
	h := platform.ChartHealthTimers()
	if l.Sim == nil || l.Sim.MachineHealthCheck == nil {
		return h
	}
	if m := l.Sim.MachineHealthCheck; m.MaxUnhealthy != "" {
		h.MaxUnhealthy = m.MaxUnhealthy
	}
	if d := l.Sim.MachineHealthCheck.NodeStartupTimeout.D(); d != 0 {
		h.NodeStartupTimeout = d
	}
	return h
}

// AddStandIn registers a stand-in to join the manager at Up. Call it before Up.
func (s *Substrate) AddStandIn(f StandIn) { s.standIns = append(s.standIns, f) }

// Env is what the stand-ins share (faults, latencies, logs); valid after New, its Logs after Up.
func (s *Substrate) Env() *simenv.Env { return s.env }

// Canary is the canary value planted in every tenant namespace and tenant cluster.
func (s *Substrate) Canary() string { return s.canary }

// Name is "sim".
func (s *Substrate) Name() string { return "sim" }

// Preflight checks the control plane binaries and the upstream controllers are built, and, on a
// lane with sim.realNode, what the real Node needs (NodePreflight).
func (s *Substrate) Preflight(ctx context.Context) error {
	tools, err := controlplane.FindTools()
	if err == nil {
		_, err = realupstream.Find(tools)
	}
	if err != nil {
		return &substrate.PreflightError{Substrate: "sim", Missing: err.Error(), Hint: "run `make tools` once (about 25 minutes cold)"}
	}
	if s.lane.Sim != nil && s.lane.Sim.RealNode {
		return NodePreflight(ThisHost())
	}
	return nil
}

// Up brings up the management cluster, the stand-ins and the platform inside lane phase
// "cluster", and returns the management cluster as the harness reaches it (through the proxy).
func (s *Substrate) Up(ctx context.Context, clock *budget.Clock) (c *cluster.Cluster, err error) {
	pctx, span, err := clock.Phase(ctx, PhaseCluster)
	if err != nil {
		return nil, err
	}
	defer func() { span.End(err) }()
	// A failed Up leaves the management processes running for the run's diagnostics and hands
	// back the management cluster as the world reaches it; Down stops them.
	defer func() {
		if err != nil {
			s.mu.Lock()
			w := s.w
			s.mu.Unlock()
			if w != nil {
				c = w.Cluster
			}
		}
	}()
	in, err := s.prepareUp()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	admin := controlplane.User{Name: HarnessUser, Groups: []string{"system:masters"}, Token: token()}
	w, err := s.startWorld(pctx, in, admin)
	if err != nil {
		return nil, err
	}
	if err := s.addControllers(w, in); err != nil {
		return nil, err
	}
	if err := s.runWorld(pctx, w, in); err != nil {
		return nil, err
	}
	c, err = s.harnessCluster(w, admin)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(s.o.Log, "sim: up in %s (faults: %s)\n", time.Since(start).Round(time.Millisecond), orNone(s.env.Faults.String()))
	return c, nil
}

// upInputs are what Up's steps share: the control plane binaries, the upstream controllers and
// the CRDs they replace, whether the world has a real Node and the address the apiservers
// advertise to it.
type upInputs struct {
	tools     controlplane.Tools
	real      *realControllers
	replaced  []string
	realNode  bool
	advertise string
}

// prepareUp finds the binaries, makes the work folder, finds the upstream controllers (keeping
// them on the substrate for Down) and prepares the real Node when the lane has one.
func (s *Substrate) prepareUp() (upInputs, error) {
	tools, err := controlplane.FindTools()
	if err != nil {
		return upInputs{}, &substrate.PreflightError{Substrate: "sim", Missing: err.Error(), Hint: "run `make tools`"}
	}
	if err := s.workDir(); err != nil {
		return upInputs{}, err
	}
	s.env.Dir = s.dir
	real, err := newRealControllers(tools, filepath.Join(s.dir, "upstream"), s.o.Log)
	if err != nil {
		return upInputs{}, &substrate.PreflightError{Substrate: "sim", Missing: err.Error(), Hint: "run `make tools`"}
	}
	real.podMetrics = filepath.Join(s.dir, simenv.PodMetricsDir)
	realNode := s.lane.Sim != nil && s.lane.Sim.RealNode
	advertise, err := s.prepareRealNode(realNode, real)
	if err != nil {
		return upInputs{}, err
	}
	s.mu.Lock()
	s.real = real
	s.mu.Unlock()
	replaced, err := real.replaced()
	if err != nil {
		return upInputs{}, err
	}
	return upInputs{tools: tools, real: real, replaced: replaced, realNode: realNode, advertise: advertise}, nil
}

// startWorld starts the management world with admin as its one user (and the audit log when
// asked for), keeping it on the substrate even when it fails, so Up and Down can reach it.
func (s *Substrate) startWorld(ctx context.Context, in upInputs, admin controlplane.User) (*world.World, error) {
	audit, err := auditArgs(s.dir, os.Getenv(AuditLogEnv))
	if err != nil {
		return nil, err
	}
	w, err := world.Start(ctx, world.Options{Tools: in.tools, Dir: filepath.Join(s.dir, "management"), Users: []controlplane.User{admin},
		Replaced: in.replaced, AlsoInstall: in.real.installCRDs, DNSService: true, HostJobs: true, APIServerArgs: audit,
		AdvertiseAddress: in.advertise, Log: s.o.Log})
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("sim: management cluster: %w", err)
	}
	s.env.Logs = w
	s.env.Webhooks = w
	return w, nil
}

// addControllers registers on the world's manager, before it runs: the Kamaji stand-in, the
// platform at the chart's versions, cert-manager, the host's Job kubelets, the stand-ins added
// before Up and, with a real Node, the Talos templates' webhook.
func (s *Substrate) addControllers(w *world.World, in upInputs) error {
	var err error
	s.k, err = kamaji.Add(w.Manager(), kamaji.Options{
		Tools: in.tools, EtcdURL: w.Etcd.ClientURL, Dir: filepath.Join(s.dir, "tenants"), Canary: s.canary, Log: s.o.Log,
		AdvertiseAddress: in.advertise,
	})
	if err != nil {
		return err
	}
	w.OnStop(s.k.Stop)
	// The versions the chart the sim renders offers, as its own files say: a cluster at any of
	// them renders at that release (the tenant control plane reports it, the Talos workers'
	// kubelet runs it), one outside them is refused as the chart refuses it.
	versions, err := in.real.b.ChartVersions()
	if err != nil {
		return &substrate.PreflightError{Substrate: "sim", Missing: err.Error(), Hint: "run `make tools`"}
	}
	offered := map[string]string{}
	for _, v := range versions {
		offered[v.Version] = v.Patch
	}
	if _, err := platform.Add(w.Manager(), platform.Options{
		Versions: offered,
		Canary:   s.canary, Faults: s.env.Faults, Health: s.health, Log: s.o.Log,
	}); err != nil {
		return err
	}
	// cert-manager, and the kubelets of the Job pods (the Kubernetes chart's kubectl scripts),
	// which run on the host.
	if err := certmanager.Setup(w.Manager()); err != nil {
		return err
	}
	if err := hostjobs.Setup(w.Manager(), hostjobs.Options{
		Kubectl: in.tools.Path("kubectl"), APIServerURL: w.API.URL, APIServerCA: w.API.CA.CertPEM,
		Logs: w, Dir: mkdir(s.dir, "jobs"), Log: s.o.Log,
	}); err != nil {
		return err
	}
	for _, f := range s.standIns {
		if err := f(w.Manager(), w, s.env); err != nil {
			return fmt.Errorf("sim: registering a stand-in: %w", err)
		}
	}
	if in.realNode {
		if s.talos, err = newTalosTemplates(s.env, w.Cluster.Client); err != nil {
			return err
		}
		if err := w.Mutating(s.talos.webhook()); err != nil {
			return err
		}
	}
	return nil
}

// runWorld runs the world's manager, starts the upstream controllers (with their faults) and
// the real Node when there is one, and installs what the platform has before any test: the
// builtins, the storage and the Kubernetes app's definition.
func (s *Substrate) runWorld(ctx context.Context, w *world.World, in upInputs) error {
	if err := w.Run(ctx); err != nil {
		return err
	}
	t := time.Now()
	if err := in.real.start(ctx, w); err != nil {
		return err
	}
	fmt.Fprintf(s.o.Log, "sim: upstream controllers running in %s (%s)\n", time.Since(t).Round(time.Millisecond), in.real.summary())
	in.real.injectControllerFaults(w, s.env, s.o.Log)
	if in.realNode {
		if err := s.startRealNode(ctx, w, in.real.kubevirt); err != nil {
			return err
		}
	}
	if err := platform.InstallBuiltins(ctx, w.Cluster.Client); err != nil {
		return err
	}
	if err := installStorage(ctx, w, s.o.Log); err != nil {
		return err
	}
	// The Kubernetes app's definition carries the values schema of the chart the sim renders,
	// as the platform's does: the harness reads the tenant versions offered from it.
	valuesSchema, err := os.ReadFile(filepath.Join(in.real.b.ChartDir(), "values.schema.json"))
	if err != nil {
		return &substrate.PreflightError{Substrate: "sim", Missing: err.Error(), Hint: "run `make tools`"}
	}
	return platform.PublishKubernetesDefinition(ctx, w.Cluster.Client, valuesSchema)
}

// harnessCluster starts the proxy in front of the management apiserver and returns the
// management cluster as the harness reaches it through the proxy as admin, with its
// kubeconfig written to the work folder.
func (s *Substrate) harnessCluster(w *world.World, admin controlplane.User) (*cluster.Cluster, error) {
	px, err := startProxy(w.API, w.API.Admin(), s.env, s.o.Log)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.px = px
	s.mu.Unlock()
	cfg := &rest.Config{Host: px.URL, BearerToken: admin.Token, TLSClientConfig: rest.TLSClientConfig{CAData: px.CA.CertPEM}}
	c, err := cluster.New("management", cfg)
	if err != nil {
		return nil, err
	}
	s.kubecfg = filepath.Join(s.dir, "management.kubeconfig")
	if err := cluster.WriteKubeconfig(s.kubecfg, "sim-management", cfg); err != nil {
		return nil, err
	}
	c.KubeconfigPath = s.kubecfg
	return c, nil
}

// workDir is WorkDir/sim, or a temporary folder of the substrate's own (removed at Down unless
// kept). Its path stays short: apiserver and etcd sockets live under it.
func (s *Substrate) workDir() error {
	if s.o.WorkDir != "" {
		s.dir = filepath.Join(s.o.WorkDir, "sim")
		return os.MkdirAll(s.dir, 0o700)
	}
	d, err := os.MkdirTemp("", "cozy-e2e-sim-")
	s.dir, s.ownDir = d, true
	return err
}

// Down stops every process and removes the temporary folder, unless the run keeps everything
// (E2E_KEEP=1): then it prints how to reach both clusters and keeps them up until ctx ends
// (the processes die with the harness). It copies the fault observations into the artifacts.
// Idempotent.
func (s *Substrate) Down(ctx context.Context) error {
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		return nil
	}
	s.down = true
	s.mu.Unlock()
	err := s.copyEvidence()
	if s.o.Keep && s.w != nil {
		for _, l := range s.Describe() {
			fmt.Fprintln(s.o.Log, l)
		}
		fmt.Fprintln(s.o.Log, "sim: E2E_KEEP=1: everything stays up until this run is interrupted (Ctrl-C)")
		<-ctx.Done()
	}
	s.stop()
	if s.ownDir && !s.o.Keep {
		err = errors.Join(err, os.RemoveAll(s.dir))
	}
	return err
}

func (s *Substrate) stop() {
	s.mu.Lock()
	px, w := s.px, s.w
	s.mu.Unlock()
	px.close()
	if w != nil {
		w.Stop()
	}
	_ = s.env.Close()
}

// Pids lists every process the substrate runs (management and tenants), for tests.
func (s *Substrate) Pids() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	if s.w != nil {
		out = append(out, s.w.Pids()...)
	}
	if s.k != nil {
		out = append(out, s.k.Pids()...)
	}
	return append(out, s.real.pids()...)
}

// World is the management world (nil before Up).
func (s *Substrate) World() *world.World { return s.w }

func token() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func mkdir(parent, name string) string {
	p := filepath.Join(parent, name)
	_ = os.MkdirAll(p, 0o700)
	return p
}
