package realupstream

import (
	"context"
	"fmt"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// StartCAPK installs CAPK's CRDs (with their contract labels) and its validating webhook
// configuration, and runs capk-manager against the apiserver of o.Kubeconfig until it is ready.
//
// Flags (sigs.k8s.io/cluster-api-provider-kubevirt v0.1.10 main.go lines 90-109): leader election
// is off unless --leader-elect; metrics and health bind to --metrics-bind-addr and --health-addr
// (loopback here); the webhook server is always set up (main.go line 157) on --webhook-port with
// tls.crt and tls.key from --webhook-cert-dir. The server binds every interface (main.go line
// 145 sets no host and there is no flag for one); it answers only TLS with its own certificate.
// CAPK reads Cluster API objects at v1beta1 (main.go line 35, sigs.k8s.io/cluster-api v1.10.0),
// so the Cluster API CRDs must serve v1beta1 through Cluster API's conversion webhook, which the
// sim's management world serves.
func StartCAPK(ctx context.Context, b *Build, c *cluster.Cluster, o Options) (*Controller, error) {
	crds, err := b.CAPKCRDs()
	if err != nil {
		return nil, err
	}
	// CAPK's CRDs serve one version each: no conversion webhook.
	if !o.CRDsInstalled {
		if err := InstallCRDs(ctx, c, crds, nil); err != nil {
			return nil, err
		}
	}
	ctl, err := newWebhookController("capk-manager", b.Path(CAPKBinary), "capk", o)
	if err != nil {
		return nil, err
	}
	ctl.Args = append([]string{
		"--kubeconfig=" + o.Kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-addr=" + hostPort(ctl.MetricsURL),
		"--health-addr=" + hostPort(ctl.HealthURL),
		fmt.Sprintf("--webhook-port=%d", ctl.Webhook.Port),
		"--webhook-cert-dir=" + ctl.Webhook.CertDir,
	}, o.ExtraArgs...)
	// config/default/kustomization.yaml line 3: namePrefix capk-.
	if err := ctl.startWithWebhooks(ctx, c, b.Src("capk", "config", "webhook", "manifests.yaml"), "capk-"); err != nil {
		return nil, err
	}
	return ctl, nil
}
