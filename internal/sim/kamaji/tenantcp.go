package kamaji

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// tenantCP is one running tenant control plane.
type tenantCP struct {
	name   string // namespace/name of the TenantControlPlane
	dir    string
	api    *controlplane.APIServer
	procs  []*controlplane.Process
	client *cluster.Cluster
	// published is set once the control plane's status was first reported.
	published bool
}

// A deleted tenant's processes get deleteGrace to exit after SIGTERM, as a pod gets its
// termination grace period; when the world stops they get stopGrace, since everything they
// would finish goes with it (a tenant kube-apiserver v1.35 takes more than 5 s to exit).
const (
	deleteGrace = 5 * time.Second
	stopGrace   = time.Second
)

// stop stops the control plane's processes together, each killed grace after its SIGTERM. A
// second call with a shorter grace cuts a first one short.
func (t *tenantCP) stop(grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range t.procs {
		wg.Add(1)
		go func(p *controlplane.Process) { defer wg.Done(); p.Stop(grace) }(p)
	}
	wg.Wait()
}

func (t *tenantCP) pids() []int {
	var out []int
	for _, p := range t.procs {
		if pid := p.Pid(); pid != 0 {
			out = append(out, pid)
		}
	}
	return out
}

// TenantControllers are the kube-controller-manager controllers a tenant control plane runs:
// all but those of nodes' addresses and routes, volumes and load balancers, which no tenant here
// has. Its TLS bootstrap ones (the CSR approver and signer) are among them.
const TenantControllers = "*,-nodeipam,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller"

// startTenant runs a tenant control plane for namespace/name on the shared etcd under a prefix
// of its own: kube-apiserver, kube-controller-manager, kube-scheduler, and kwok for the Nodes
// the guest stand-in annotates. On error what started is stopped.
func (k *Kamaji) startTenant(ctx context.Context, namespace, name, serviceCIDR string, started func(*controlplane.APIServer, string) error) (_ *tenantCP, err error) {
	key := namespace + "/" + name
	dir := filepath.Join(k.opts.Dir, namespace, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	t := &tenantCP{name: key, dir: dir}
	defer func() {
		if err != nil {
			t.stop(deleteGrace)
		}
	}()
	start := time.Now()
	t.api, err = controlplane.StartAPIServer(ctx, k.opts.Tools, controlplane.APIServerOptions{
		Name: "tenant " + key, Dir: dir, EtcdURL: k.opts.EtcdURL,
		EtcdPrefix: "/tenants/" + namespace + "/" + name, ServiceCIDR: serviceCIDR,
		// Kamaji's apiserver certificate holds the TenantControlPlane's Service names
		// (clastix/kamaji internal/kubeadm/configuration.go:59-66 (CertSANs)), which is how a
		// Talos worker reaches it (https://<name>.<namespace>.svc:6443); it authenticates
		// bootstrap tokens (clastix/kamaji internal/builders/controlplane/deployment.go:735
		// (--enable-bootstrap-token-auth)).
		SANs:             []string{name, name + "." + namespace + ".svc", name + "." + namespace + ".svc.cluster.local"},
		ExtraArgs:        []string{"--enable-bootstrap-token-auth=true"},
		AdvertiseAddress: k.opts.AdvertiseAddress,
		Started: func(api *controlplane.APIServer) error {
			if started == nil {
				return nil
			}
			return started(api, dir)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("tenant control plane %s: %w", key, err)
	}
	t.procs = append(t.procs, &t.api.Process)
	kcm, err := controlplane.StartControllerManager(ctx, k.opts.Tools, t.api, controlplane.ControllerManagerOptions{
		Dir:         dir,
		Controllers: TenantControllers,
	})
	if err != nil {
		return nil, fmt.Errorf("tenant control plane %s: %w", key, err)
	}
	t.procs = append(t.procs, kcm)
	sched, err := controlplane.StartScheduler(ctx, k.opts.Tools, t.api, dir)
	if err != nil {
		return nil, fmt.Errorf("tenant control plane %s: %w", key, err)
	}
	t.procs = append(t.procs, sched)
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	kw, err := controlplane.StartKwok(ctx, k.opts.Tools, t.api, controlplane.KwokOptions{
		Dir: dir,
		ExtraArgs: []string{
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + GuestNodeAnnotation + "=fake",
			"--node-ip=127.0.0.1", fmt.Sprintf("--node-port=%d", port), fmt.Sprintf("--server-address=127.0.0.1:%d", port),
			"--cidr=10.243.0.1/16", "--node-lease-duration-seconds=40",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("tenant control plane %s: %w", key, err)
	}
	t.procs = append(t.procs, kw)
	if t.client, err = cluster.New("tenant "+key, t.api.Admin()); err != nil {
		return nil, err
	}
	fmt.Fprintf(k.opts.Log, "sim: tenant control plane %s up in %s (%s)\n", key, time.Since(start).Round(time.Millisecond), t.api.URL)
	return t, nil
}

// kubeconfigFor is an admin kubeconfig for the tenant apiserver api, as Kamaji writes it.
func kubeconfigFor(api *controlplane.APIServer, dir, contextName string) ([]byte, error) {
	path := filepath.Join(dir, strings.ReplaceAll(contextName, "/", "-")+".kubeconfig")
	if err := cluster.WriteKubeconfig(path, contextName, api.Admin()); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}
