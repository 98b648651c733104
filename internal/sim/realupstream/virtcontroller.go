package realupstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// StartVirtController runs KubeVirt's virt-controller against the apiserver of o.Kubeconfig with
// the arguments virt-operator gives it (kv.Controller, the Deployment of kubevirt.io/kubevirt
// v1.8.4 pkg/virt-operator/resource/generate/components/deployments.go lines 391-497:
// --launcher-image, --exporter-image, --port 8443, -v 2), and waits until it leads. Its KubeVirt
// CRDs must be installed (kv.CRDs; and, with DataVolumes served, VirtControllerCDICRDs). It first
// makes the KubeVirt CR it reads its configuration from (kv.CR, in KubeVirtNamespace) and marks it
// Deployed, as virt-operator does once the install is done: virt-controller reads the
// configuration only of a KubeVirt whose status.phase is set (pkg/virt-config/configuration.go
// lines 359-383).
//
// Flags beside virt-operator's: --kubeconfig (it runs outside a pod); --listen 127.0.0.1 and a
// free --port for its one HTTPS server (/healthz, /leader, /metrics: watch/application.go lines
// 546-569), whose certificate it reads from --prom-cert-file and --prom-key-file (by default
// /etc/virt-controller/certificates/tls.crt and tls.key, application.go lines 134-135, where
// virt-operator mounts its Secret kubevirt-controller-certs, deployments.go line 471 and
// secrets.go line 36; here a self-signed pair). It is
// ready when /leader says it leads: it answers {"apiserver":{"leader":"true"}} once it holds the
// lease kubevirt/virt-controller and its informers synced (application.go lines 983-1001,
// 643-646).
func StartVirtController(ctx context.Context, b *Build, c *cluster.Cluster, kv *KubeVirt, o Options) (*Controller, error) {
	if kv == nil || kv.Controller == nil || len(kv.Controller.Spec.Template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("upstream: virt-controller: no Deployment from virt-operator's install strategy")
	}
	if err := applyKubeVirtCR(ctx, c, kv.CR); err != nil {
		return nil, err
	}
	ctl, err := newController("virt-controller", b.Path(VirtControllerBinary), o)
	if err != nil {
		return nil, err
	}
	serving, err := NewServing(filepath.Join(o.Dir, "certificates"), "virt-controller")
	if err != nil {
		return nil, err
	}
	ctl.HealthURL = fmt.Sprintf("https://127.0.0.1:%d", serving.Port)
	args, err := replaceArg(kv.Controller.Spec.Template.Spec.Containers[0].Args, "--port", strconv.Itoa(serving.Port))
	if err != nil {
		return nil, fmt.Errorf("upstream: virt-controller: %w", err)
	}
	ctl.Args = append(append(args,
		"--kubeconfig="+o.Kubeconfig,
		"--listen=127.0.0.1",
		"--prom-cert-file="+filepath.Join(serving.CertDir, "tls.crt"),
		"--prom-key-file="+filepath.Join(serving.CertDir, "tls.key"),
	), o.ExtraArgs...)
	pool := x509.NewCertPool()
	pool.AddCert(serving.CA.Cert)
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}}
	// A restarted virt-controller is ready when it leads again: after a SIGKILL it takes the
	// lease back once its holder's lease ran out (client-go leaderelection).
	ctl.restart = func(ctx context.Context) error {
		ctl.Started = time.Now()
		if err := ctl.Start(); err != nil {
			return err
		}
		if err := ctl.WaitFor(ctx, "leading (/leader)", leads(hc, ctl.HealthURL+"/leader")); err != nil {
			ctl.Stop(5 * time.Second)
			return err
		}
		ctl.Ready = time.Since(ctl.Started)
		return nil
	}
	if err := ctl.restart(ctx); err != nil {
		return nil, err
	}
	return ctl, nil
}

// leads asks virt-controller's /leader whether it leads.
func leads(hc *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		if resp.StatusCode != http.StatusOK || !strings.Contains(strings.ReplaceAll(string(body), " ", ""), `"leader":"true"`) {
			return fmt.Errorf("/leader answered %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// applyKubeVirtCR creates the namespace and the KubeVirt CR (or replaces its spec) and sets its
// phase Deployed (kubevirt.io/api core/v1 KubeVirtPhaseDeployed) and its default architecture as
// virt-operator does when it handles the CR (kubevirt.io/kubevirt v1.8.4
// pkg/virt-operator/kubevirt.go:1038-1039, pkg/virt-operator/util/config.go:497-506: the spec's,
// else the operator's own GOARCH, kept once set). KubeVirt's components take the cluster's
// default architecture from that status (pkg/virt-config/configuration.go:313-318): without it
// virt-api's mutator leaves a new VMI's architecture empty and its validator refuses the VMI
// ("unsupported architecture").
func applyKubeVirtCR(ctx context.Context, c *cluster.Cluster, cr *kubevirtv1.KubeVirt) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cr.Namespace}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("upstream: namespace %s: %w", cr.Namespace, err)
	}
	want := cr.DeepCopy()
	live := &kubevirtv1.KubeVirt{}
	err := c.Client.Get(ctx, client.ObjectKeyFromObject(want), live)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Client.Create(ctx, want); err != nil {
			return fmt.Errorf("upstream: creating KubeVirt %s/%s: %w", want.Namespace, want.Name, err)
		}
		live = want
	case err != nil:
		return fmt.Errorf("upstream: reading KubeVirt %s/%s: %w", want.Namespace, want.Name, err)
	default:
		live.Spec = want.Spec
		if err := c.Client.Update(ctx, live); err != nil {
			return fmt.Errorf("upstream: updating KubeVirt %s/%s: %w", want.Namespace, want.Name, err)
		}
	}
	live.Status.Phase = kubevirtv1.KubeVirtPhaseDeployed
	if ac := live.Spec.Configuration.ArchitectureConfiguration; ac != nil && ac.DefaultArchitecture != "" {
		live.Status.DefaultArchitecture = ac.DefaultArchitecture
	} else if live.Status.DefaultArchitecture == "" {
		live.Status.DefaultArchitecture = runtime.GOARCH
	}
	if err := c.Client.Status().Update(ctx, live); err != nil {
		return fmt.Errorf("upstream: marking KubeVirt %s/%s Deployed: %w", live.Namespace, live.Name, err)
	}
	return nil
}

// replaceArg replaces the value that follows flag in args (a copy).
func replaceArg(args []string, flag, value string) ([]string, error) {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == flag && i+1 < len(out) {
			out[i+1] = value
			return out, nil
		}
	}
	return nil, fmt.Errorf("no %s in %q", flag, args)
}
