package tenant

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/fluxrelease"
)

// CheckReleaseHistory judges the status.history of the app's HelmRelease as Cozystack's own e2e
// judges the tenant Kubernetes release (cozystack/cozystack main
// hack/e2e-chainsaw/_lib/run-kubernetes.sh:5526-5540): a Ready release with an empty history is
// wrong, and a failed or uninstalled entry is a remediation. With policy
// lane.RemediationFail a remediation is an error; with lane.RemediationReport it is returned as
// a note for the run's summary. Call it once the release is Ready.
func (p Platform) CheckReleaseHistory(ctx context.Context, names Names, policy string) (string, error) {
	hr := unstructuredOf(HelmReleaseGVK)
	key := types.NamespacedName{Namespace: names.Namespace, Name: names.HelmRelease()}
	if err := p.Mgmt.Client.Get(ctx, key, hr); err != nil {
		return "", fmt.Errorf("tenant: reading HelmRelease %s of Kubernetes %s: %w", key, names, err)
	}
	rem, empty := fluxrelease.Of(hr)
	switch {
	case empty:
		return "", fmt.Errorf("tenant: HelmRelease %s of Kubernetes %s has an empty status.history: Flux records every release it makes, so helm-controller did not install it as it reports", key, names)
	case rem.Count() == 0:
		return "", nil
	case policy == lane.RemediationFail:
		return "", fmt.Errorf("tenant: %s (policy.remediation.tenant: fail; the release failed before it became Ready: its events and the helm-controller log say why)", rem)
	}
	return fmt.Sprintf("tenant release remediations: %s (reported, policy.remediation.tenant: %s)", rem, policy), nil
}
