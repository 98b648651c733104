// Package registry lists the harness's suites and what each needs of a lane, for lanes-check
// and the orchestrator to refuse a lane that cannot run them before anything starts.
package registry

import (
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/suites/kubernetes"
)

// Catalog is every suite by name (suites/<name>) with the phases it runs in.
func Catalog() lane.SuiteCatalog {
	return lane.SuiteCatalog{"kubernetes": kubernetes.Phases()}
}
