package realupstream

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// Options configure one upstream controller process.
type Options struct {
	// Dir is its working folder (log, webhook certificates); it is created.
	Dir string
	// Kubeconfig is the kubeconfig file of the apiserver it reconciles against (the sim's
	// management apiserver; its admin kubeconfig: the controllers' RBAC is not exercised here).
	Kubeconfig string
	// ExtraArgs are appended verbatim.
	ExtraArgs []string
	// CRDsInstalled says the controller's CRDs are installed already (the sim substrate installs
	// them before its manager starts); they are not installed again.
	CRDsInstalled bool
	// Webhook is the webhook server identity to serve with (made by NewServing beforehand, when
	// CRDs must name its conversion endpoint before the controller runs); nil makes a fresh one
	// in Dir.
	Webhook *Serving
	// PodCIDR is the range the world's kwok gives pod IPs; a controller that dials pods (CDI's
	// reads an importer's progress from its pod IP) finds that range on its own loopback.
	PodCIDR string
	// PodMetricsDir, when set, is where the stand-ins write what a pod serves on its metrics
	// port, one file per pod IP; a controller that reads pods' metrics reaches them there.
	PodMetricsDir string
	// RealPodCIDRs are the pod ranges of real Nodes on this host (internal/sim/node): a controller
	// in namespaces of its own reaches their pods through a relay of the pod network (only with
	// PodMetricsDir).
	RealPodCIDRs []string
}

// Controller is an upstream controller running as a local process. Its log is LogPath; it dies
// with the harness (parent-death signal) and Stop stops it.
type Controller struct {
	controlplane.Process
	// HealthURL serves /healthz and /readyz, MetricsURL /metrics; both on loopback.
	HealthURL, MetricsURL string
	// Webhook is its webhook server's identity; nil for a controller without webhooks.
	Webhook *Serving
	// Started is when the process started; Ready how long it then took to answer /readyz (and
	// to complete a TLS handshake on its webhook port).
	Started time.Time
	Ready   time.Duration
	// onStop runs after the process stopped (an isolated controller's relay).
	onStop []func()
	// restart starts the process again after it exited, with what its Start function set up
	// (ports, certificates, webhook configurations, namespaces), and waits until it is ready.
	restart func(context.Context) error
}

// Stop stops the process (SIGTERM, then SIGKILL after grace) and what served it. Idempotent.
func (c *Controller) Stop(grace time.Duration) {
	c.Process.Stop(grace)
	for _, f := range c.onStop {
		f()
	}
}

// start runs c and waits until its readiness endpoint answers 200 and its webhook server (if
// any) completes a handshake. If it exits first, or ctx ends, the error names it and quotes the
// end of its log, and it is stopped.
func (c *Controller) start(ctx context.Context) error {
	c.Started = time.Now()
	if err := c.Start(); err != nil {
		return err
	}
	readyz := controlplane.Readyz(&http.Client{Timeout: time.Second}, c.HealthURL)
	err := c.WaitFor(ctx, "ready (/readyz and its webhook server)", func(ctx context.Context) error {
		if err := readyz(ctx); err != nil {
			return err
		}
		if c.Webhook != nil {
			return c.Webhook.answers(ctx)
		}
		return nil
	})
	if err != nil {
		c.Stop(5 * time.Second)
		return err
	}
	c.Ready = time.Since(c.Started)
	return nil
}

// Memory is the process's resident set size now and at its peak (VmRSS and VmHWM), in bytes.
func (c *Controller) Memory() (rss, peak int64, err error) {
	pid := c.Pid()
	if pid == 0 {
		return 0, 0, fmt.Errorf("%s is not running", c.Name)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, _ := strings.Cut(s.Text(), ":")
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return rss, peak, s.Err()
}

// serving is o.Webhook, or a fresh webhook identity in Dir.
func (o Options) serving(name string) (*Serving, error) {
	if o.Webhook != nil {
		return o.Webhook, nil
	}
	return NewServing(filepath.Join(o.Dir, "webhook-certs"), name)
}

// newController prepares a controller process with a health and a metrics port on loopback.
func newController(name, path string, o Options) (*Controller, error) {
	if o.Dir == "" || o.Kubeconfig == "" {
		return nil, fmt.Errorf("upstream: %s: Options.Dir and Options.Kubeconfig are required", name)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	ports, err := controlplane.FreePorts(2)
	if err != nil {
		return nil, err
	}
	health, metrics := ports[0], ports[1]
	ctl := &Controller{
		Process: controlplane.Process{
			Name: name, Path: path, LogPath: filepath.Join(o.Dir, name+".log"),
		},
		HealthURL:  fmt.Sprintf("http://127.0.0.1:%d", health),
		MetricsURL: fmt.Sprintf("http://127.0.0.1:%d", metrics),
	}
	ctl.restart = ctl.start
	return ctl, nil
}

// newWebhookController prepares a controller process as newController does, with a webhook
// server identity: o.Webhook, or a fresh one named provider.
func newWebhookController(name, path, provider string, o Options) (*Controller, error) {
	ctl, err := newController(name, path, o)
	if err != nil {
		return nil, err
	}
	if ctl.Webhook, err = o.serving(provider); err != nil {
		return nil, err
	}
	return ctl, nil
}

// startWithWebhooks installs the webhook configurations of manifests (see
// InstallWebhookConfigurations), pointed at c's webhook server, then starts c. If c does not get
// ready they are deleted again: webhooks that fail closed and point at nothing would refuse
// every write of their kinds.
func (c *Controller) startWithWebhooks(ctx context.Context, cl *cluster.Cluster, manifests, prefix string) error {
	hooks, err := InstallWebhookConfigurations(ctx, cl, manifests, prefix, c.Webhook)
	if err != nil {
		return err
	}
	if err := c.start(ctx); err != nil {
		deleteAll(cl, hooks)
		return err
	}
	return nil
}

// withEnv makes c run its binary through env(1) with vars set, since a Process takes no
// environment of its own; env execs the binary, so the process (its pid, its memory, the signals
// Stop sends) is the controller's. It returns the arguments that must lead c.Args.
func withEnv(c *Controller, vars ...string) ([]string, error) {
	env, err := exec.LookPath("env")
	if err != nil {
		return nil, fmt.Errorf("upstream: %s needs env(1) to be given its environment: %w", c.Name, err)
	}
	binary := c.Path
	c.Path = env
	return append(vars, binary), nil
}

func hostPort(url string) string { return strings.TrimPrefix(url, "http://") }
