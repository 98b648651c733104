package realupstream

import (
	"context"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// StartHelmController installs the Flux CRDs helm-controller needs (FluxCRDs) and runs it against
// the apiserver of o.Kubeconfig until it is ready. It has no webhooks.
//
// It plays the platform's tenant helm-controller. Cozystack's own (v1.6.1 internal/fluxinstall/
// manifests/fluxcd.yaml lines 8068-8079, helm-controller v1.5.0) takes only releases without a
// sharding.fluxcd.io/key label; every tenant release is born with sharding.fluxcd.io/key: tenants
// (the Kubernetes app's: packages/system/kubernetes-rd/cozyrds/kubernetes.yaml lines 38-39; its
// addon releases: templates/helmreleases/*.yaml) and is run by a shard that flux-shard-operator
// clones from that container with --watch-label-selector=sharding.fluxcd.io/key=shard<i>
// (packages/system/flux-shard-operator/README.md line 9). The sim has no platform releases and
// no shard operator: this one controller takes every sharded release
// (--watch-label-selector=sharding.fluxcd.io/key) and otherwise runs with the platform's flags:
// every namespace watched, no leader election, 5 concurrent reconciles, dependencies requeued
// every 30 s, and the ExternalArtifact feature gate, without
// which a chartRef to an ExternalArtifact is refused (helm-controller v1.6.2 main.go line 360,
// internal/controller/helmrelease_controller.go lines 825-830,
// internal/features/features.go line 119: off by default). Metrics and health bind to loopback
// (--metrics-addr, --health-addr); events go only to the apiserver (no --events-addr: there is
// no notification-controller).
func StartHelmController(ctx context.Context, b *Build, c *cluster.Cluster, o Options) (*Controller, error) {
	crds, err := b.FluxCRDs()
	if err != nil {
		return nil, err
	}
	if !o.CRDsInstalled {
		if err := InstallCRDs(ctx, c, crds, nil); err != nil {
			return nil, err
		}
	}
	ctl, err := newController("helm-controller", b.Path(HelmControllerBinary), o)
	if err != nil {
		return nil, err
	}
	// helm-controller parses its flags with pflag (main.go line 24), which does not take in
	// controller-runtime's Go flag --kubeconfig (lines 113-158); controller-runtime then reads
	// KUBECONFIG. HOME is its folder, so nothing Helm might cache lands in the user's home.
	env, err := withEnv(ctl, "KUBECONFIG="+o.Kubeconfig, "HOME="+o.Dir)
	if err != nil {
		return nil, err
	}
	ctl.Args = append(env, []string{
		"--watch-all-namespaces",
		"--enable-leader-election=false",
		"--watch-label-selector=sharding.fluxcd.io/key",
		"--concurrent=5",
		"--requeue-dependency=30s",
		"--feature-gates=ExternalArtifact=true",
		"--metrics-addr=" + hostPort(ctl.MetricsURL),
		"--health-addr=" + hostPort(ctl.HealthURL),
		"--log-encoding=json",
	}...)
	ctl.Args = append(ctl.Args, o.ExtraArgs...)
	if err := ctl.start(ctx); err != nil {
		return nil, err
	}
	return ctl, nil
}
