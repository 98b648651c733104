package kind

import (
	"fmt"
	"slices"

	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// Delete deletes the kind cluster of lane l: the teardown of a cluster a run kept
// (`bin/e2e down --lane <lane>`). A cluster that is not there is not an error.
func Delete(l *lane.Lane) (bool, error) {
	p := kindcluster.NewProvider(kindcluster.ProviderWithDocker())
	names, err := p.List()
	if err != nil {
		return false, fmt.Errorf("kind: listing the clusters (is the docker daemon reachable?): %w", err)
	}
	if !slices.Contains(names, l.Name) {
		return false, nil
	}
	if err := p.Delete(l.Name, ""); err != nil {
		return false, fmt.Errorf("kind delete cluster %s: %w", l.Name, err)
	}
	return true, nil
}
