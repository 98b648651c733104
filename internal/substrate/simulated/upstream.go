package simulated

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubevirtcore "kubevirt.io/api/core"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/fixtures"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
)

// realControllers are the upstream controllers every sim run runs as processes next to the
// management control plane: CAPK v0.1.10 (KubevirtCluster, KubevirtMachine: the VMs, their
// userdata Secrets, providerIDs, the providerID on the tenant Node) and the Talos bootstrap
// provider v0.6.12 (TalosConfig: the bootstrap data). Their CRDs come from their modules, not
// from fixtures/crds: the world leaves its copies out (world.Options.Replaced) and the CRDs are
// installed before the world's manager starts, since stand-ins watch KubevirtMachines. The
// processes start once the Cluster API webhooks answer (they read Cluster API at v1beta1
// through its conversion webhook) and stop with the world, before its apiserver.
//
// Flux's helm-controller v1.6.2 runs the same way, with the CRDs of what the Cozystack v1.6.1
// Kubernetes chart renders (their real KamajiControlPlane and HelmRelease in place of the
// fixtures' hand-written ones) and the platform's instance types; the chart is served on
// loopback and published as the ExternalArtifact a Kubernetes app's release names. It installs
// the releases the app API stand-in marks for the real chart (simenv.RendererLabel).
//
// KubeVirt's virt-controller v1.8.4 runs the same way, configured by the platform's KubeVirt CR:
// its CRDs are what virt-operator installs for that CR (realupstream.KubeVirtInstall, computed while
// the fixture CRDs install, replacing the fixtures' kubevirt.io ones), with the CDI kinds it
// informs on; it owns VirtualMachines and VirtualMachineInstances up to Scheduled, and the
// virt-handler stand-in (internal/sim/kubevirt) the rest.
type realControllers struct {
	b                   *realupstream.Build
	dir                 string
	capkCRDs, cabptCRDs []realupstream.CRD
	chartCRDs           []realupstream.CRD
	cdiCRDs             []realupstream.CRD
	// podMetrics is where the stand-ins write what pods serve on their metrics port.
	podMetrics string
	// realNode: the lane has a real Node; KubeVirt is installed for it (kubeVirtInstall) and
	// cdi-controller reaches its pods (realNodeSubnets).
	realNode bool
	// virtKubeconfig is virt-controller's kubeconfig as its service account ("": the admin's).
	virtKubeconfig string
	cabptHook      *realupstream.Serving
	charts         *realupstream.ChartServer
	mu             sync.Mutex
	running        []*realupstream.Controller
	// supervisors keep the running controllers alive as a kubelet keeps the platform's Pods,
	// by step name; backoff is their restart back-off (the kubelet's).
	supervisors map[string]*realupstream.Supervisor
	backoff     realupstream.Backoff
	// kubevirt is what virt-operator installs, set by installCRDs; kubevirtLater are the CRDs of
	// it installed once the world runs (see installKubeVirtCRDs).
	kubevirt      *realupstream.KubeVirt
	kubevirtLater []realupstream.CRD
	// kubevirtFixtures are the fixture CRDs of KubeVirt's group the install replaces.
	kubevirtFixtures map[string]bool
	log              io.Writer
}

// ChartArtifact is the ExternalArtifact a Kubernetes app's HelmRelease names (Cozystack v1.6.1
// packages/system/kubernetes-rd/cozyrds/kubernetes.yaml lines 36-43).
const (
	ChartArtifactNamespace = "cozy-system"
	ChartArtifactName      = "cozystack-kubernetes-application-kubevirt-kubernetes"
)

// newRealControllers finds what `make tools` built and reads the controllers' CRDs; the Talos
// provider's webhook identity is made now, because its CRDs name its conversion endpoint.
func newRealControllers(tools controlplane.Tools, dir string, log io.Writer) (*realControllers, error) {
	b, err := realupstream.Find(tools)
	if err != nil {
		return nil, err
	}
	r := &realControllers{b: b, dir: dir, log: log, backoff: realupstream.KubeletBackoff(), supervisors: map[string]*realupstream.Supervisor{}}
	if r.capkCRDs, err = b.CAPKCRDs(); err != nil {
		return nil, err
	}
	if r.cabptCRDs, err = b.CABPTCRDs(); err != nil {
		return nil, err
	}
	if r.cabptHook, err = realupstream.NewServing(filepath.Join(dir, "cabpt", "webhook-certs"), "cabpt"); err != nil {
		return nil, err
	}
	flux, err := b.FluxCRDs()
	if err != nil {
		return nil, err
	}
	chart, err := b.ChartCRDs()
	if err != nil {
		return nil, err
	}
	r.chartCRDs = append(flux, chart...)
	// CDI v1.64.0's controller, with the CRDs cdi-operator installs.
	if r.cdiCRDs, err = b.CDICRDs(); err != nil {
		return nil, err
	}
	return r, nil
}

// replaced names the fixture CRDs these controllers bring their own of: every fixture CRD of
// KubeVirt's group besides the providers' and the chart's (virt-operator's install replaces them).
func (r *realControllers) replaced() ([]string, error) {
	var out []string
	for _, c := range append(append(append(append([]realupstream.CRD{}, r.capkCRDs...), r.cabptCRDs...), r.chartCRDs...), r.cdiCRDs...) {
		out = append(out, c.CRD.Name)
	}
	fx, err := fixtures.CRDs()
	if err != nil {
		return nil, err
	}
	r.kubevirtFixtures = map[string]bool{}
	for _, f := range fx {
		if f.CRD.Spec.Group == kubevirtcore.GroupName {
			out = append(out, f.CRD.Name)
			r.kubevirtFixtures[f.CRD.Name] = true
		}
	}
	return out, nil
}

// installCRDs installs the controllers' own CRDs (CABPT's converting through its webhook) and the
// platform's instance types; the world runs it beside its fixture CRDs.
func (r *realControllers) installCRDs(ctx context.Context, c *cluster.Cluster) error {
	// KubeVirt's install is computed (install-strategy takes about a second) and installed beside
	// the others; the chart's VirtualMachineClusterInstancetype is KubeVirt's own then.
	kvDone := make(chan error, 1)
	go func() { kvDone <- r.installKubeVirtCRDs(ctx, c) }()
	var chart []realupstream.CRD
	for _, crd := range r.chartCRDs {
		if !realupstream.KubeVirtGroup(crd.CRD.Spec.Group) {
			chart = append(chart, crd)
		}
	}
	err := realupstream.InstallCRDs(ctx, c, append(append(append([]realupstream.CRD{}, r.capkCRDs...), chart...), r.cdiCRDs...), nil)
	if err == nil {
		err = realupstream.InstallCRDs(ctx, c, r.cabptCRDs, r.cabptHook.Conversion())
	}
	if kvErr := <-kvDone; err == nil {
		err = kvErr
	}
	if err != nil {
		return err
	}
	// The platform's instance types, through a client that sees the new kinds.
	fresh, err := cluster.New("management", c.REST)
	if err != nil {
		return err
	}
	its, err := r.b.InstanceTypes()
	if err != nil {
		return err
	}
	// A few at a time: 65 one by one cost seconds on a loaded machine.
	sem := make(chan struct{}, 8)
	errs := make([]error, len(its))
	var wg sync.WaitGroup
	for i, it := range its {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fresh.Client.Create(ctx, it); err != nil && !apierrors.IsAlreadyExists(err) {
				errs[i] = fmt.Errorf("sim: instance type %s: %w", it.GetName(), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// start runs CAPK and CABPT against w's apiserver (its admin kubeconfig, not the harness's
// proxy: the apiserver-transient fault is the harness's, not the controllers') and stops them
// when w stops.
func (r *realControllers) start(ctx context.Context, w *world.World) error {
	steps := []struct {
		name  string
		start func(context.Context, *realupstream.Build, *cluster.Cluster, realupstream.Options) (*realupstream.Controller, error)
		hook  *realupstream.Serving
	}{
		{"capk", realupstream.StartCAPK, nil},
		{"cabpt", realupstream.StartCABPT, r.cabptHook},
		{"helm-controller", startHelmController, nil},
		{"cdi-controller", realupstream.StartCDIController, nil},
		{"virt-controller", r.startVirtController, nil},
	}
	r.installLater(w)
	if r.realNode {
		if err := r.virtControllerIdentity(ctx, w); err != nil {
			return err
		}
	}
	// All at once: each waits for its own readiness.
	errs := make([]error, len(steps)+1)
	var wg sync.WaitGroup
	for i, s := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctl, err := s.start(ctx, r.b, w.Cluster, realupstream.Options{
				Dir: filepath.Join(r.dir, s.name), Kubeconfig: w.API.AdminKubeconfig, Webhook: s.hook, CRDsInstalled: true,
				PodCIDR: world.PodCIDR, PodMetricsDir: r.podMetrics, RealPodCIDRs: r.realNodeSubnets(),
			})
			if err != nil {
				errs[i] = fmt.Errorf("sim: %w", err)
				return
			}
			sup, err := r.supervise(ctx, w, s.name, ctl)
			if err != nil {
				ctl.Stop(world.StopGrace)
				errs[i] = err
				return
			}
			w.OnStop(func() { sup.Stop(world.StopGrace) })
		}()
	}
	// The chart, served as source-controller would serve its artifact.
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[len(steps)] = r.publishChart(ctx, w)
	}()
	wg.Wait()
	return errors.Join(errs...)
}

// supervise keeps ctl running (realupstream.Supervise) as the Pod the platform runs it in.
func (r *realControllers) supervise(ctx context.Context, w *world.World, name string, ctl *realupstream.Controller) (*realupstream.Supervisor, error) {
	pod, err := r.platformPod(name)
	if err != nil {
		return nil, err
	}
	sup, err := realupstream.Supervise(ctx, w.Cluster, ctl, pod, r.backoff, r.log)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	r.mu.Lock()
	r.running = append(r.running, ctl)
	r.supervisors[name] = sup
	r.mu.Unlock()
	return sup, nil
}

// supervisor is the supervisor of the controller step name ("virt-controller", "capk", ...).
func (r *realControllers) supervisor(name string) (*realupstream.Supervisor, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sup, ok := r.supervisors[name]
	if !ok {
		names := make([]string, 0, len(r.supervisors))
		for n := range r.supervisors {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("sim: no controller %q runs (running: %s)", name, strings.Join(names, ", "))
	}
	return sup, nil
}

// startHelmController runs helm-controller on the releases the real chart renders.
func startHelmController(ctx context.Context, b *realupstream.Build, c *cluster.Cluster, o realupstream.Options) (*realupstream.Controller, error) {
	o.ExtraArgs = append(o.ExtraArgs, "--watch-label-selector=sharding.fluxcd.io/key,"+simenv.RendererLabel+"="+simenv.RendererChart)
	return realupstream.StartHelmController(ctx, b, c, o)
}

// publishChart packs the Cozystack Kubernetes chart, serves it on loopback until the world stops
// and publishes it as the ExternalArtifact the Kubernetes apps' releases name.
func (r *realControllers) publishChart(ctx context.Context, w *world.World) error {
	archive, err := realupstream.PackChart(r.b.ChartDir())
	if err != nil {
		return err
	}
	charts, err := realupstream.StartChartServer()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.charts = charts
	r.mu.Unlock()
	w.OnStop(charts.Close)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ChartArtifactNamespace}}
	if err := w.Cluster.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return realupstream.PublishExternalArtifact(ctx, w.Cluster, ChartArtifactNamespace, ChartArtifactName, charts.Add("kubernetes", archive))
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

// installKubeVirtCRDs computes what virt-operator installs for the platform's KubeVirt CR and
// installs, with the CDI kinds virt-controller informs on, the CRDs the world needs before it
// runs: KubeVirt's own, those of the fixtures it replaces (VirtualMachine and
// VirtualMachineInstance, which the stand-ins and the harness watch) and those of the chart's
// kinds (the instance types). Its other CRDs (migrations, replica sets, pools, snapshots,
// restores, exports, clones, backups, presets, namespaced instance types and preferences, which
// nothing here makes) are installed once the world runs, beside the controllers' start
// (installLater): each of KubeVirt's large schemas costs the apiserver a second or more of CPU,
// which the bring-up then does not wait for. virt-controller's VM and VMI controllers do not
// wait for those kinds (pkg/virt-controller/watch/vm/vm.go lines 179-183, watch/vmi/vmi.go lines
// 112-116); its informers of them list again until they are served.
func (r *realControllers) installKubeVirtCRDs(ctx context.Context, c *cluster.Cluster) error {
	kv, err := r.kubeVirtInstall(ctx)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	// The CDI kinds virt-controller informs on are CDI's own, installed with cdi-controller's.
	var now, later []realupstream.CRD
	for _, crd := range kv.CRDs {
		own := crd.CRD.Spec.Group == kubevirtcore.GroupName && crd.CRD.Spec.Names.Kind == kubevirtv1.KubeVirtGroupVersionKind.Kind
		if own || r.kubevirtFixtures[crd.CRD.Name] || r.chartNeeds(crd.CRD.Name) {
			now = append(now, crd)
		} else {
			later = append(later, crd)
		}
	}
	r.mu.Lock()
	r.kubevirt, r.kubevirtLater = kv, later
	r.mu.Unlock()
	return realupstream.InstallCRDs(ctx, c, now, nil)
}

// chartNeeds reports whether the chart's CRDs name a CRD of that name.
func (r *realControllers) chartNeeds(name string) bool {
	for _, c := range r.chartCRDs {
		if c.CRD.Name == name {
			return true
		}
	}
	return false
}

// installLater installs KubeVirt's other CRDs (installKubeVirtCRDs) in the background, until
// they are established or the world stops, and says how long it took.
func (r *realControllers) installLater(w *world.World) {
	r.mu.Lock()
	later := r.kubevirtLater
	r.mu.Unlock()
	if len(later) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	w.OnStop(cancel)
	go func() {
		defer cancel()
		start := time.Now()
		if err := realupstream.InstallCRDs(ctx, w.Cluster, later, nil); err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(r.log, "sim: KubeVirt's other CRDs (virt-controller's informers of them keep listing): %v\n", err)
			}
			return
		}
		fmt.Fprintf(r.log, "sim: KubeVirt's other %d CRDs established in %s\n", len(later), time.Since(start).Round(time.Millisecond))
	}()
}

// startVirtController runs virt-controller with what virt-operator gives it, as its service
// account when the world has one for it (virtControllerIdentity).
func (r *realControllers) startVirtController(ctx context.Context, b *realupstream.Build, c *cluster.Cluster, o realupstream.Options) (*realupstream.Controller, error) {
	r.mu.Lock()
	kv := r.kubevirt
	if r.virtKubeconfig != "" {
		o.Kubeconfig = r.virtKubeconfig
	}
	r.mu.Unlock()
	return realupstream.StartVirtController(ctx, b, c, kv, o)
}

// virtControllerIdentity gives virt-controller its Pod's identity in a world with a real Node,
// where virt-api runs: its mutator keeps VMI status updates from KubeVirt's service accounts only
// (kubevirt.io/kubevirt v1.8.4 pkg/virt-api/webhooks/mutating-webhook/mutators/vmi-mutator.go:134-142,
// pkg/virt-api/webhooks/serviceaccounts.go:28-37). Its service account and RBAC are what
// virt-operator installs before its workloads (realupstream.ApplyNodeSide).
func (r *realControllers) virtControllerIdentity(ctx context.Context, w *world.World) error {
	r.mu.Lock()
	kv := r.kubevirt
	r.mu.Unlock()
	if err := realupstream.ApplyNodeSide(ctx, w.Cluster, kv); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	path := filepath.Join(r.dir, "kubevirt-controller.kubeconfig")
	if err := w.API.ServiceAccountKubeconfig(realupstream.KubeVirtNamespace, "kubevirt-controller", path); err != nil {
		return fmt.Errorf("sim: virt-controller's identity: %w", err)
	}
	r.mu.Lock()
	r.virtKubeconfig = path
	r.mu.Unlock()
	return nil
}

// kubeVirtInstall is what virt-operator installs for the platform's KubeVirt CR, as a lane with a
// real Node changes it (realupstream.RealNodeKubeVirtCR: emulation, virt-handler and virt-api placed
// on the real Node only) when it has one.
func (r *realControllers) kubeVirtInstall(ctx context.Context) (*realupstream.KubeVirt, error) {
	if !r.realNode {
		return r.b.KubeVirtInstall(ctx)
	}
	cr, err := r.b.KubeVirtCR()
	if err != nil {
		return nil, err
	}
	return r.b.KubeVirtInstallFor(ctx, realupstream.RealNodeKubeVirtCR(cr, node.Label, node.Taint))
}

// realNodeSubnets are the pod ranges of the world's real Nodes, which an isolated controller
// reaches through its pod network's relay.
func (r *realControllers) realNodeSubnets() []string {
	if !r.realNode {
		return nil
	}
	return []string{node.PodRange}
}
