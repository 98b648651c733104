package realupstream

import (
	"context"
	"fmt"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// StartCABPT installs the Talos bootstrap provider's CRDs (TalosConfig and TalosConfigTemplate at
// v1alpha2 and v1alpha3, converting through its own /convert) and its validating webhook
// configuration, then runs cabpt-manager against the apiserver of o.Kubeconfig until it is ready.
// An existing TalosConfig CRD (the sim's fixtures serve v1alpha3 only) is replaced. The CRDs name
// the webhook's address before the server runs: the apiserver calls it only to convert an
// object, never to establish a CRD.
//
// Flags (github.com/siderolabs/cluster-api-bootstrap-provider-talos v0.6.12 main.go lines 49-70):
// --enable-leader-election (off by default), --webhook-port and --webhook-cert-dir (the webhook
// server always runs, main.go lines 124-130, on every interface: no host flag), --health-addr
// (its readiness is the webhook server having started, main.go lines 175-185), and Cluster API's
// manager options (sigs.k8s.io/cluster-api v1.10.9 util/flags/manager.go lines 73-80): metrics on
// --diagnostics-address, plain HTTP with --insecure-diagnostics. It reads Cluster API objects at
// v1beta1 and watches MachinePools (feature gate MachinePool, on by default in Cluster API
// v1.10), so the MachinePool CRD must exist and serve v1beta1.
func StartCABPT(ctx context.Context, b *Build, c *cluster.Cluster, o Options) (*Controller, error) {
	crds, err := b.CABPTCRDs()
	if err != nil {
		return nil, err
	}
	ctl, err := newWebhookController("cabpt-manager", b.Path(CABPTBinary), "cabpt", o)
	if err != nil {
		return nil, err
	}
	if !o.CRDsInstalled {
		if err := InstallCRDs(ctx, c, crds, ctl.Webhook.Conversion()); err != nil {
			return nil, err
		}
	}
	ctl.Args = append([]string{
		"--kubeconfig=" + o.Kubeconfig,
		"--enable-leader-election=false",
		"--health-addr=" + hostPort(ctl.HealthURL),
		"--diagnostics-address=" + hostPort(ctl.MetricsURL),
		"--insecure-diagnostics",
		fmt.Sprintf("--webhook-port=%d", ctl.Webhook.Port),
		"--webhook-cert-dir=" + ctl.Webhook.CertDir,
	}, o.ExtraArgs...)
	// config/default/kustomization.yaml line 3: namePrefix cabpt-.
	if err := ctl.startWithWebhooks(ctx, c, b.Src("cabpt", "config", "webhook", "manifests.yaml"), "cabpt-"); err != nil {
		return nil, err
	}
	return ctl, nil
}
