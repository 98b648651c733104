// Package registry lists the harness's suites and what each needs of a lane, for lanes-check
// and the orchestrator to refuse a lane that cannot run them before anything starts.
package registry

import (
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/suites/kubernetes"
)

// Catalog is every suite by name (suites/<name>) with the phases it runs in on lane l: its
// label filter there decides which specs run, and so which phases it needs. A filter that
// does not parse is a need CheckSuites refuses, naming it.
func Catalog(l *lane.Lane) lane.SuiteCatalog {
	needs, err := kubernetes.Phases(l)
	if err != nil {
		needs = []lane.PhaseNeed{{Err: err}}
	}
	return lane.SuiteCatalog{kubernetes.Name: needs}
}
