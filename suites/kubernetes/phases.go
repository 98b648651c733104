package kubernetes

import "github.com/cozystack/cozy-e2e/framework/lane"

// Phases are the lane phases the suite runs in, in order: a lane running the suite must give
// each a ceiling (lanes-check refuses one that does not, and the suite judges it a
// configuration failure rather than the product's).
func Phases() []lane.PhaseNeed {
	return []lane.PhaseNeed{{Name: "tenant"}, {Name: "pools"}, {Name: "refusals"}, {Name: "teardown"}}
}
