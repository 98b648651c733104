package assumptions

import (
	"fmt"
	"sort"
	"strings"
)

// Need is a Package the lane's suites cannot do without, and why.
type Need struct {
	Package string
	Why     string
}

// SuiteNeeds are the Packages the kubernetes suite needs on the management cluster: the apps
// it creates, what renders them into Cluster API objects, what runs the workers, and the root
// tenant's etcd its clusters keep their state in.
func SuiteNeeds() []Need {
	return []Need{
		{"cozystack.networking", "the management cluster's CNI (kube-ovn and Cilium)"},
		{"cozystack.cert-manager", "the webhooks' certificates"},
		{"cozystack.cozystack-engine", "the ApplicationDefinition CRD every app kind is served from"},
		{"cozystack.tenant-application", "the Tenant kind (HelmRelease tenant-rd)"},
		{"cozystack.cozystack-basics", "the tenant-root namespace, its HelmRelease and the cozystack-values Secret"},
		{"cozystack.kubernetes-application", "the Kubernetes kind"},
		{"cozystack.kubevirt", "the workers' VMs"},
		{"cozystack.kubevirt-cdi", "the workers' disk imports (DataVolumes)"},
		{"cozystack.kamaji", "the tenant control planes"},
		{"cozystack.capi-operator", "the Cluster API providers"},
		{"cozystack.capi-provider-core", "Cluster API"},
		{"cozystack.capi-provider-bootstrap-kubeadm", "the Talos and Kairos bootstrap providers"},
		{"cozystack.capi-provider-cp-kamaji", "the Kamaji control plane provider"},
		{"cozystack.capi-provider-infra-kubevirt", "CAPK, the workers' machines"},
		{"cozystack.metallb", "the tenant apiservers' LoadBalancer addresses"},
		{"cozystack.etcd-operator", "the root tenant's etcd, the tenant clusters' DataStore"},
		{"cozystack.etcd-application", "the Etcd kind the root tenant's etcd is"},
		{"cozystack.victoria-metrics-operator", "the root tenant's etcd HelmRelease dependsOn it (packages/apps/tenant/templates/etcd.yaml:22-24) and the etcd chart renders a VMPodScrape (packages/extra/etcd/templates/podscrape.yaml:1-2)"},
	}
}

// CheckDisabled judges a lane's platform.disabledPackages against every embedded graph: a
// name the platform does not emit, a Package the suites need, and a set that orphans any
// Package (a Package whose dependency is missing never gets a HelmRelease, and then the
// platform's own HelmRelease never becomes Ready: templates/bundles/system.yaml:292-295 at
// main) are each one problem, naming the chain.
func CheckDisabled(disabled []string) ([]string, error) {
	graphs, err := Graphs()
	if err != nil {
		return nil, err
	}
	needs := map[string]string{}
	for _, n := range SuiteNeeds() {
		needs[n.Package] = n.Why
	}
	var problems []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			problems = append(problems, s)
		}
	}
	for _, d := range disabled {
		var missing []string
		for _, g := range graphs {
			if !g.Has(d) {
				missing = append(missing, g.Short())
			}
		}
		if len(missing) == len(graphs) {
			add(fmt.Sprintf("%s is not a Package the platform emits for isp-full-generic with iaas (not at %s)", d, strings.Join(missing, " nor ")))
		}
		if why, ok := needs[d]; ok {
			add(fmt.Sprintf("%s is needed by the lane's suites: %s", d, why))
		}
	}
	// The same finding at several revisions is said once, naming them all.
	var order []string
	at := map[string][]string{}
	for _, g := range graphs {
		for _, msg := range orphanFindings(g.Orphans(disabled), needs) {
			if _, ok := at[msg]; !ok {
				order = append(order, msg)
			}
			at[msg] = append(at[msg], g.Short())
		}
	}
	for _, msg := range order {
		add(fmt.Sprintf("at %s: %s", strings.Join(at[msg], " and "), msg))
	}
	return problems, nil
}

// WhySafe says, for one disabled Package, why disabling it orphans nothing at every graph:
// nothing depends on it, or only Packages also disabled do.
func WhySafe(name string, disabled []string) string {
	graphs, err := Graphs()
	if err != nil {
		return err.Error()
	}
	off := map[string]bool{}
	for _, d := range disabled {
		off[d] = true
	}
	deps := map[string]bool{}
	for _, g := range graphs {
		for _, d := range g.Dependants(name) {
			deps[d] = true
		}
	}
	if len(deps) == 0 {
		return "nothing depends on it"
	}
	var names, on []string
	for d := range deps {
		names = append(names, d)
		if !off[d] {
			on = append(on, d)
		}
	}
	sort.Strings(names)
	sort.Strings(on)
	if len(on) > 0 {
		return strings.Join(on, ", ") + verb(len(on)) + " on it and " + map[bool]string{true: "is", false: "are"}[len(on) == 1] + " not disabled"
	}
	return "only " + strings.Join(names, ", ") + verb(len(names)) + " on it, disabled too"
}

// orphanFindings says what the orphans of one graph cost: each chain that reaches a Package the
// suites need (a chain that another one extends is left out), then, per disabled Package, the
// other Packages it orphans.
func orphanFindings(orphans []Orphan, needs map[string]string) []string {
	var chains []Orphan
	for _, o := range orphans {
		if _, ok := needs[o.Package]; ok {
			chains = append(chains, o)
		}
	}
	told := map[string]bool{}
	var out []string
	for _, o := range chains {
		if extendedBy(o, chains) {
			continue
		}
		var why []string
		for _, l := range o.Chain {
			told[l.Package] = true
			if w, ok := needs[l.Package]; ok {
				why = append(why, l.Package+": "+w)
			}
		}
		out = append(out, fmt.Sprintf("%s, which the lane's suites need (%s)", o.Describe(), strings.Join(why, "; ")))
	}
	rest := map[string][]string{}
	for _, o := range orphans {
		if !told[o.Package] {
			l := o.Chain[len(o.Chain)-1]
			rest[o.Disabled] = append(rest[o.Disabled], fmt.Sprintf("%s (needs %s, %s)", o.Package, l.Dependency, l.At))
		}
	}
	for _, d := range sortedKeys(rest) {
		out = append(out, fmt.Sprintf("disabling %s orphans %s; a Package left without a dependency never gets a HelmRelease, so the platform's HelmRelease never becomes Ready",
			d, strings.Join(rest[d], ", ")))
	}
	return out
}

// extendedBy says whether another chain runs through o's whole chain and further.
func extendedBy(o Orphan, chains []Orphan) bool {
	for _, c := range chains {
		if len(c.Chain) <= len(o.Chain) || c.Disabled != o.Disabled {
			continue
		}
		same := true
		for i, l := range o.Chain {
			if c.Chain[i] != l {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

func verb(n int) string {
	if n == 1 {
		return " depends"
	}
	return " depend"
}
