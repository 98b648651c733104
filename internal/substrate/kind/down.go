package kind

import (
	"fmt"
	"slices"

	kindcluster "sigs.k8s.io/kind/pkg/cluster"
)

// Delete deletes the kind cluster named name (ClusterName): the teardown of a cluster a run
// kept (`bin/e2e down --lane <lane>`) and the workflows' always-run cleanup. A cluster that is
// not there is not an error.
func Delete(name string) (bool, error) {
	p := kindcluster.NewProvider(kindcluster.ProviderWithDocker())
	names, err := p.List()
	if err != nil {
		return false, fmt.Errorf("kind: listing the clusters (is the docker daemon reachable?): %w", err)
	}
	if !slices.Contains(names, name) {
		return false, nil
	}
	if err := p.Delete(name, ""); err != nil {
		return false, fmt.Errorf("kind delete cluster %s: %w", name, err)
	}
	return true, nil
}
