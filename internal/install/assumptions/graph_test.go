package assumptions

import (
	"strings"
	"testing"
)

// The embedded graphs load, each dependency is a Package of the same graph, and the revisions
// are the ones docs/upstream.md cites.
func TestGraphsLoad(t *testing.T) {
	graphs, err := Graphs()
	if err != nil {
		t.Fatal(err)
	}
	if len(graphs) != 2 || graphs[0].Revision != CozystackMain || graphs[1].Revision != CozystackRelease {
		t.Fatalf("graphs: %d, revisions %v", len(graphs), revisions(graphs))
	}
	for _, g := range graphs {
		if len(g.Packages) < 50 {
			t.Errorf("%s: %d Packages", g.File, len(g.Packages))
		}
		for _, n := range SuiteNeeds() {
			if !g.Has(n.Package) {
				t.Errorf("%s: the suites need %s, which the graph does not hold", g.File, n.Package)
			}
		}
	}
}

func revisions(gs []*Graph) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Revision)
	}
	return out
}

// Disabling seaweedfs (as the lanes once did) orphans the Tenant kind, tenant-root and CDI:
// the operator creates no HelmRelease for a Package whose dependency is missing, and each
// Package waits on the one before it. The refusal names the chain with each link's source line.
func TestDisablingSeaweedfsOrphansTheTenantPath(t *testing.T) {
	problems, err := CheckDisabled([]string{"cozystack.seaweedfs-application"})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(problems, "\n")
	for _, want := range []string{
		"at main 3c780acd417f and v1.6.2: disabling cozystack.seaweedfs-application orphans cozystack.tenant-application (needs it, sources/tenant-application.yaml:18) → cozystack.cozystack-basics (needs cozystack.tenant-application, sources/cozystack-basics.yaml:15) → cozystack.kubevirt-cdi (needs cozystack.cozystack-basics, sources/kubevirt-cdi.yaml:23), which the lane's suites need (cozystack.tenant-application: the Tenant kind (HelmRelease tenant-rd); cozystack.cozystack-basics: the tenant-root namespace, its HelmRelease and the cozystack-values Secret; cozystack.kubevirt-cdi: the workers' disk imports (DataVolumes))",
		"at main 3c780acd417f and v1.6.2: disabling cozystack.seaweedfs-application orphans cozystack.backupstrategy-controller (needs cozystack.cozystack-basics, sources/backupstrategy-controller.yaml:30), cozystack.vm-disk-application (needs cozystack.kubevirt-cdi, sources/vm-disk-application.yaml:16); a Package left without a dependency never gets a HelmRelease",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
}

// What each kind of refusal says: a name the platform does not emit, a Package the suites
// need, a leaf's dependency disabled without the leaf (monitoring-agents without velero).
func TestCheckDisabledRefusals(t *testing.T) {
	cases := []struct {
		disabled []string
		want     string
	}{
		{[]string{"cozystack.linstr"}, "cozystack.linstr is not a Package the platform emits for isp-full-generic with iaas (not at main 3c780acd417f nor v1.6.2)"},
		{[]string{"cozystack.kubevirt"}, "cozystack.kubevirt is needed by the lane's suites: the workers' VMs"},
		{[]string{"cozystack.monitoring-agents"}, "at main 3c780acd417f and v1.6.2: disabling cozystack.monitoring-agents orphans cozystack.backupstrategy-controller (needs cozystack.velero, sources/backupstrategy-controller.yaml:34), cozystack.velero (needs cozystack.monitoring-agents, sources/velero.yaml:16); a Package left without a dependency never gets a HelmRelease"},
		{[]string{"cozystack.victoria-metrics-operator"}, "cozystack.victoria-metrics-operator is needed by the lane's suites: the root tenant's etcd HelmRelease dependsOn it"},
		{[]string{"cozystack.linstor"}, "disabling cozystack.linstor orphans cozystack.cozystack-scheduler (needs cozystack.linstor-scheduler, sources/cozystack-scheduler.yaml:22), cozystack.linstor-scheduler (needs cozystack.linstor, sources/linstor-scheduler.yaml:15);"},
	}
	for _, c := range cases {
		problems, err := CheckDisabled(c.disabled)
		if err != nil {
			t.Fatal(err)
		}
		if all := strings.Join(problems, "\n"); !strings.Contains(all, c.want) {
			t.Errorf("%v: want %q in:\n%s", c.disabled, c.want, all)
		}
	}
}

// The set the lanes disable orphans nothing at either revision, and each member says why.
func TestTheLanesDisabledSetOrphansNothing(t *testing.T) {
	set := []string{"cozystack.linstor", "cozystack.linstor-scheduler", "cozystack.cozystack-scheduler", "cozystack.goldpinger",
		"cozystack.monitoring-agents", "cozystack.velero", "cozystack.backupstrategy-controller"}
	problems, err := CheckDisabled(set)
	if err != nil || len(problems) > 0 {
		t.Fatalf("%v\n%s", err, strings.Join(problems, "\n"))
	}
	for name, want := range map[string]string{
		"cozystack.goldpinger":        "nothing depends on it",
		"cozystack.monitoring-agents": "only cozystack.velero depends on it, disabled too",
		"cozystack.linstor":           "only cozystack.linstor-scheduler depends on it, disabled too",
	} {
		if got := WhySafe(name, set); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if got := WhySafe("cozystack.monitoring-agents", nil); got != "cozystack.velero depends on it and is not disabled" {
		t.Errorf("unsafe: %q", got)
	}
}
