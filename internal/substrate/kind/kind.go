package kind

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// dockerProbeTimeout bounds the one `docker info` the preflight asks, so a hung daemon is named
// within the preflight's few seconds instead of eating its phase.
const dockerProbeTimeout = 4 * time.Second

// upPhases are the lane phases the kind substrate runs, in order.
func upPhases() []string { return []string{"cluster", "components", "platform"} }

// Options configure the kind substrate.
type Options struct {
	substrate.Options
	// FromPhase starts later in the plan (E2E_FROM_PHASE): the substrate's phases before it are
	// recorded as skipped and the cluster of the lane's name is attached, not created.
	FromPhase string
	// PlatformSource overrides the lane's platform.source (E2E_PLATFORM_SOURCE).
	PlatformSource string
	// PlatformRegistry is where a checkout source's build pushes the packages artifact
	// (E2E_PLATFORM_REGISTRY).
	PlatformRegistry string
	// NodeImage overrides the lane's node image (E2E_KIND_NODE_IMAGE,
	// <image>:<tag>@sha256:<hex>).
	NodeImage string
	// RegistryAuth logs the nodes and the operator in to PlatformRegistry
	// (E2E_PLATFORM_REGISTRY_USERNAME and _PASSWORD); nil: anonymous pulls.
	RegistryAuth *RegistryAuth
	// Host is how the preflight looks at the machine; zero means this machine.
	Host Host
	// Cluster names the kind cluster (ClusterEnv); empty means the lane's name. A cluster of
	// this name left by an earlier attempt of the same job is deleted before creating.
	Cluster string
	// Network is the docker network of the nodes (NetworkEnv); empty means kind's "kind".
	Network string

	// provider stands in for kind's in tests; nil means kind's own, driving docker.
	provider clusterProvider
	// runner and loader stand in for the commands and the image loader of a checkout build in
	// tests; nil means this machine's and Cluster API's kind loader.
	runner install.Runner
	loader install.ImageLoader
}

// OptionsFromEnv adds E2E_FROM_PHASE, E2E_PLATFORM_SOURCE, E2E_PLATFORM_REGISTRY (with its
// login) and E2E_KIND_NODE_IMAGE to the common options.
func OptionsFromEnv(base substrate.Options) Options {
	return Options{Options: base, FromPhase: os.Getenv("E2E_FROM_PHASE"), PlatformSource: os.Getenv("E2E_PLATFORM_SOURCE"),
		PlatformRegistry: os.Getenv(RegistryEnv), NodeImage: os.Getenv(NodeImageEnv), RegistryAuth: RegistryAuthFromEnv(os.Getenv),
		Cluster: os.Getenv(ClusterEnv), Network: os.Getenv(NetworkEnv)}
}

// Substrate is a kind management cluster with the platform installed.
type Substrate struct {
	lane       *lane.Lane
	opts       Options
	provider   clusterProvider
	kubeconfig string
	// name is the kind cluster's name (Options.Cluster, else the lane's).
	name    string
	report  Report
	created bool
	files   []*os.File
	// source is the platform source the preflight resolved; manifest the operator manifest it
	// verified (nil for a checkout, built in the components phase).
	source   *install.PlatformSource
	manifest *install.Manifest
}

// New builds the kind substrate of lane l.
func New(l *lane.Lane, o Options) (*Substrate, error) {
	if l.Substrate != lane.SubstrateKind {
		return nil, fmt.Errorf("%s: substrate is %q, not kind", l.File, l.Substrate)
	}
	if o.FromPhase != "" {
		if _, ok := l.Budget.Phase(o.FromPhase); !ok {
			return nil, fmt.Errorf("E2E_FROM_PHASE=%s is not a phase of %s (phases: %s)", o.FromPhase, l.File, phaseNames(l))
		}
	}
	if o.NodeImage != "" {
		ref, err := ParseNodeImage(o.NodeImage)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", NodeImageEnv, o.NodeImage, err)
		}
		l = WithNodeImage(l, ref)
	}
	if a := o.RegistryAuth; a != nil {
		if err := a.Check(); err != nil {
			return nil, err
		}
	}
	if o.Host.Docker == nil {
		o.Host = RealHost()
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	name, err := ClusterName(l, func(string) string { return o.Cluster })
	if err != nil {
		return nil, err
	}
	return &Substrate{lane: l, opts: o, name: name, kubeconfig: filepath.Join(o.WorkDir, "kind-"+name+".kubeconfig")}, nil
}

// Name is "kind".
func (s *Substrate) Name() string { return "kind" }

// NodeImage is the node image the run uses (the lane's, or E2E_KIND_NODE_IMAGE's) and where
// its pin comes from; an unpinned one is returned with the error the preflight names.
func (s *Substrate) NodeImage() (image, source string, err error) {
	image, _, err = NodeImage(s.lane)
	return image, nodeImageSource(s.lane), err
}

// Preflight checks the machine before anything slow and writes substrate/preflight.txt.
func (s *Substrate) Preflight(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	s.report = Check(pctx, s.lane, s.opts.Host)
	// Where the platform comes from is known before anything is created: say so now, not after
	// the cluster phase.
	s.report.Findings = append(s.report.Findings, s.checkPlatform(ctx))
	if a := s.opts.RegistryAuth; a != nil {
		s.report.Findings = append(s.report.Findings, registryFinding(s.lane, *a))
	}
	s.writeArtifact("preflight.txt", []byte(s.report.Text()))
	return s.report.Err(s.lane)
}

// Up brings the cluster up (or attaches to it), installs and gates, one lane phase at a time.
func (s *Substrate) Up(ctx context.Context, clock *budget.Clock) (*cluster.Cluster, error) {
	start := 0
	if s.opts.FromPhase != "" {
		start = len(upPhases())
		for i, p := range upPhases() {
			if p == s.opts.FromPhase {
				start = i
			}
		}
	}
	s.ensureProvider()
	var c *cluster.Cluster
	for i, phase := range upPhases() {
		if _, ok := s.lane.Budget.Phase(phase); !ok {
			continue
		}
		if i < start {
			if err := clock.Skip(phase, "E2E_FROM_PHASE="+s.opts.FromPhase); err != nil {
				return nil, err
			}
			if phase == "cluster" {
				var err error
				if c, err = s.attach(ctx); err != nil {
					return nil, err
				}
			}
			continue
		}
		pctx, span, err := clock.Phase(ctx, phase)
		if err != nil {
			return nil, err
		}
		err = s.run(pctx, phase, &c, span.Note)
		span.End(err)
		if err != nil {
			return c, fmt.Errorf("phase %s: %w", phase, err)
		}
	}
	return c, nil
}

// run runs one phase; note adds a line to the phase's entry in the summary.
func (s *Substrate) run(ctx context.Context, phase string, c **cluster.Cluster, note func(string)) error {
	switch phase {
	case "cluster":
		var err error
		*c, err = s.bringUp(ctx)
		return err
	case "components", "platform":
		o, err := s.installOptions(ctx, *c)
		if err != nil {
			return err
		}
		o.Note = note
		if phase == "components" {
			if o.Manifest, err = s.platformManifest(ctx, o.Source); err != nil {
				return err
			}
			return install.Components(ctx, *c, o)
		}
		return install.Platform(ctx, *c, o)
	}
	return nil
}

func (s *Substrate) bringUp(ctx context.Context) (*cluster.Cluster, error) {
	exists, err := s.exists()
	if err != nil {
		return nil, err
	}
	switch {
	case exists && s.opts.Reuse:
		fmt.Fprintf(s.opts.Log, "kind: reusing cluster %s (E2E_REUSE=1)\n", s.name)
		return s.attachLabelled(ctx, s.nodeCount())
	case exists && s.opts.Cluster != "":
		// The job's own name: what is there is a leftover of an earlier attempt of this job
		// (cancelled before its cleanup), never another job's cluster.
		fmt.Fprintf(s.opts.Log, "kind: deleting cluster %s, left by an earlier attempt of this job (%s)\n", s.name, ClusterEnv)
		if err := s.provider.Delete(s.name, ""); err != nil {
			return nil, fmt.Errorf("kind delete cluster %s (a leftover of this job): %w", s.name, err)
		}
	case exists:
		return nil, fmt.Errorf("a kind cluster named %s exists already: E2E_REUSE=1 reuses it, or remove it (%sbin/e2e down --lane %s)", s.name, s.envPrefix(), s.lane.Name)
	}
	hostsDir := filepath.Join(s.opts.WorkDir, "containerd-hosts")
	co := ConfigOptions{CgroupV1: s.report.CgroupV1, HostsDir: hostsDir}
	if a := s.opts.RegistryAuth; a != nil {
		if co.KubeletDockerConfig, err = a.writeKubeletDockerConfig(s.opts.WorkDir); err != nil {
			return nil, err
		}
	}
	cfg, err := Config(s.lane, co)
	if err != nil {
		return nil, err
	}
	for _, name := range cfg.HostsFileNames() {
		p := filepath.Join(hostsDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(cfg.HostsFiles[name]), 0o644); err != nil {
			return nil, err
		}
	}
	data, err := cfg.YAML()
	if err != nil {
		return nil, err
	}
	s.writeArtifact("kind-config.yaml", data)
	dl, _ := ctx.Deadline()
	done := make(chan error, 1)
	go func() {
		// No wait for Ready: the nodes have no CNI until the platform installs kube-ovn and
		// Cilium, so kind's wait (a busy loop) would spend the whole phase and then return nil.
		// The Node objects are waited for below; Ready is judged by the platform gates.
		done <- s.provider.Create(s.name, createSpec{Config: cfg.Cluster, Kubeconfig: s.kubeconfig, WaitForReady: 0})
	}()
	fmt.Fprintf(s.opts.Log, "kind: creating cluster %s (%d nodes), up to %s\n", s.name, len(cfg.Cluster.Nodes), time.Until(dl).Round(time.Second))
	select {
	case err := <-done:
		s.created = true
		if err != nil {
			return nil, fmt.Errorf("kind create cluster %s: %w", s.name, err)
		}
	case <-ctx.Done():
		s.created = true
		return nil, fmt.Errorf("kind create cluster %s: still creating when the cluster phase ran out (%w); Down removes it", s.name, ctx.Err())
	}
	return s.attachLabelled(ctx, len(cfg.Cluster.Nodes))
}

// nodeCount is how many nodes the lane's kind cluster has.
func (s *Substrate) nodeCount() int {
	n := 1
	if s.lane.Kind != nil {
		n += s.lane.Kind.Workers
	}
	return n
}

// attachLabelled attaches to the cluster, waits for its nodes to register and labels the
// control plane as the platform expects (LabelControlPlane).
func (s *Substrate) attachLabelled(ctx context.Context, nodes int) (*cluster.Cluster, error) {
	c, err := s.attach(ctx)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(c.REST)
	if err != nil {
		return c, err
	}
	labelled, err := LabelControlPlane(ctx, dyn, nodes, s.opts.Log)
	if err != nil {
		return c, fmt.Errorf("kind cluster %s: %w", s.name, err)
	}
	fmt.Fprintf(s.opts.Log, "kind: labelled %s %s=%s (the platform's kube-ovn selects it) and removed %s (MetalLB's speaker announces nothing from a node that carries it)\n",
		strings.Join(labelled, ", "), assumptions.ControlPlaneLabel, assumptions.ControlPlaneLabelValue, assumptions.ExcludeFromExternalLBLabel)
	return c, nil
}

func (s *Substrate) exists() (bool, error) {
	names, err := s.provider.List()
	if err != nil {
		return false, fmt.Errorf("kind: list clusters: %w", err)
	}
	return slices.Contains(names, s.name), nil
}

// attach exports the kubeconfig of the lane's cluster and builds the client.
func (s *Substrate) attach(ctx context.Context) (*cluster.Cluster, error) {
	s.ensureProvider()
	if exists, err := s.exists(); err != nil {
		return nil, err
	} else if !exists {
		return nil, fmt.Errorf("no kind cluster named %s to attach to (E2E_REUSE or E2E_FROM_PHASE need one from an earlier run kept with E2E_KEEP=1)", s.name)
	}
	if err := s.provider.ExportKubeConfig(s.name, s.kubeconfig); err != nil {
		return nil, fmt.Errorf("kind: export kubeconfig of %s: %w", s.name, err)
	}
	c, err := cluster.FromKubeconfig("management", s.kubeconfig)
	if err != nil {
		return nil, err
	}
	c.TenantConfig = TenantAccess(c, s.opts.Log)
	c.TenantUnanswered = Unannounced(c.Kube)
	return c, nil
}

// Down deletes the cluster this run created, unless the run keeps it (E2E_KEEP=1): then it
// prints how to reach it. A cluster it only attached to (E2E_REUSE, E2E_FROM_PHASE) is left as
// it was. Deleting a cluster that is not there is not an error.
func (s *Substrate) Down(ctx context.Context) error {
	for _, f := range s.files {
		_ = f.Close()
	}
	s.files = nil
	if s.opts.Keep {
		for _, line := range s.Describe() {
			fmt.Fprintln(s.opts.Log, line)
		}
		return nil
	}
	if s.provider == nil || !s.created {
		return nil
	}
	if err := s.provider.Delete(s.name, s.kubeconfig); err != nil {
		return fmt.Errorf("kind delete cluster %s: %w", s.name, err)
	}
	return nil
}

var _ substrate.Substrate = (*Substrate)(nil)
var _ substrate.Access = (*Substrate)(nil)

func (s *Substrate) writeArtifact(name string, data []byte) {
	if s.opts.Artifacts == "" {
		return
	}
	dir := filepath.Join(s.opts.Artifacts, "substrate")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
}

func (s *Substrate) artifactWriter(name string) io.Writer {
	if s.opts.Artifacts == "" {
		return nil
	}
	dir := filepath.Join(s.opts.Artifacts, "substrate")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil
	}
	s.files = append(s.files, f)
	return f
}

func phaseNames(l *lane.Lane) string {
	names := make([]string, len(l.Budget.Phases))
	for i, p := range l.Budget.Phases {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
