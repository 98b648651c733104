package workflows

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// managementSetup is what a kind lane's management cluster is: the platform source it
// installs and the Kubernetes version of its kind node. Lanes of one setup differ only in what
// runs on it (tenant versions, pools), which one install holds as conformance clusters.
func managementSetup(l *lane.Lane) string {
	src := ""
	if l.Platform != nil {
		src = l.Platform.Source
		if l.Platform.Variant != "" {
			src += " (" + l.Platform.Variant + ")"
		}
	}
	node := ""
	for _, c := range l.Components {
		if c.Name == lane.KindNodeComponent {
			node = c.Version
		}
	}
	return fmt.Sprintf("platform %s on management Kubernetes %s", src, node)
}

// oneJobPerSetup refuses two kind lanes of one management setup that both run on every pull
// request and push: one install holds both lanes' tenant versions as conformance clusters
// (clusters[]), so two jobs would install the same platform twice. A nightly lane is apart: it
// runs on the schedule only (runner.nightly says why the lane stands alone), one per setup.
func oneJobPerSetup(kind []*lane.Lane) error {
	// by[nightly][setup] are the lanes of one setup that run on every change, or nightly.
	by := map[bool]map[string][]string{false: {}, true: {}}
	for _, l := range kind {
		by[l.Runner.Nightly][managementSetup(l)] = append(by[l.Runner.Nightly][managementSetup(l)], l.Name)
	}
	var errs []string
	for _, nightly := range []bool{true, false} {
		for _, setup := range slices.Sorted(maps.Keys(by[nightly])) {
			names := by[nightly][setup]
			if len(names) < 2 {
				continue
			}
			sort.Strings(names)
			if nightly {
				errs = append(errs, fmt.Sprintf("nightly kind lanes %s install the same management setup (%s) in jobs of their own: "+
					"make them one lane, its clusters on timelines of their own (budget.phases[].cluster)", strings.Join(names, ", "), setup))
				continue
			}
			errs = append(errs, fmt.Sprintf("kind lanes %s install the same management setup (%s) in jobs of their own on every pull request: "+
				"make them one lane whose conformance clusters run their tenant versions on one install (clusters[].kubernetes or clusters[].versions)",
				strings.Join(names, ", "), setup))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// Scheduled are the kind lanes the nightly schedule runs: one per management setup, its
// runner.nightly lane where it has one (a nightly lane runs the specs of the lanes that run on
// every change too, on the same install: lanes/kubernetes-lifecycle.yaml), else its lane of
// every change.
func Scheduled(kind []*lane.Lane) []string {
	nightly := map[string]bool{}
	for _, l := range kind {
		if l.Runner.Nightly {
			nightly[managementSetup(l)] = true
		}
	}
	var out []string
	for _, l := range kind {
		if l.Runner.Nightly || !nightly[managementSetup(l)] {
			out = append(out, l.Name)
		}
	}
	return out
}

// setupLines say, per kind lane, its management setup and its tenant clusters at their versions.
func setupLines(kind []*lane.Lane) []string {
	var out []string
	for _, l := range kind {
		var cs []string
		for _, c := range l.ConformanceClusters() {
			cs = append(cs, c.Name+" "+c.Kubernetes.Version)
		}
		when := "every pull request and push"
		if l.Runner.Nightly {
			when = "nightly"
		}
		out = append(out, fmt.Sprintf("%s (%s): %s; tenant clusters %s", l.Name, when, managementSetup(l), strings.Join(cs, ", ")))
	}
	return out
}
