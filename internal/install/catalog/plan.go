package catalog

import (
	"fmt"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
	"github.com/cozystack/cozy-e2e/internal/laneplan"
)

// PlanSections are the kind lane's install steps and gates, for laneplan.Write. A lane that
// is not a kind lane has none; a kind lane whose pins do not match the catalog gets one section
// saying so.
func PlanSections(l *lane.Lane) []laneplan.Section {
	if l.Substrate != lane.SubstrateKind && l.Substrate != lane.SubstrateExisting {
		return nil
	}
	pinned, err := ForLane(l)
	if err != nil {
		return []laneplan.Section{{Title: "install (cannot plan)", Lines: []string{err.Error()}}}
	}
	install := []string{
		"phase cluster: kind cluster " + l.Name + " from the generated node config, created without waiting for Ready; kubeconfig exported to the run's work folder;",
		"  every Node registered, then the control-plane node labelled " + assumptions.ControlPlaneLabel + "=" + assumptions.ControlPlaneLabelValue,
		"phase components, in order:",
		"  StorageClasses local (default) and replicated on the node disk (rancher.io/local-path, WaitForFirstConsumer)",
		"  Cozystack operator (generic variant) from the platform source, server-side applied: a release or manifest source",
		"    as downloaded and verified against its sha256 in the preflight; a checkout built first with its own targets",
		"    (make -C packages/core/installer image-operator image-packages, make manifests), the operator image loaded into the nodes",
		"  Package cozystack.cozystack-platform (variant " + variant(l) + "), server-side applied",
	}
	for _, p := range pinned {
		install = append(install, fmt.Sprintf("  gate %-24s %s", p.Name, gateLine(p)))
		for _, c := range p.Checks {
			install = append(install, "       and "+c)
		}
	}
	install = append(install,
		"  beside the gates: a Package orphaned by a disabled one (Ready=False "+assumptions.DependenciesNotReady+") ends the phase at once, class configuration",
		"phase platform: every Package Ready (its HelmReleases created; an orphan is a configuration failure naming the chain),",
		"  every HelmRelease Ready on a fresh listing (each non-Ready one's message printed),",
		"  remediated HelmReleases (failed or uninstalled in status.history) handled by policy.remediation.install: "+l.Policy.Remediation.InstallPolicy()+",",
		"  built-in NodeGroupClasses talos and kairos present, APIServices v1alpha1.apps.cozystack.io and v1alpha1.core.cozystack.io Available,",
		"  then the root tenant's etcd: Tenant "+assumptions.RootTenantNamespace+"/"+assumptions.RootTenant+" spec.etcd true (as Cozystack's e2e patches it),",
		"  HelmRelease "+assumptions.RootTenantNamespace+"/"+assumptions.RootEtcdRelease+" Ready and DataStore "+assumptions.RootDataStore+" present (the tenant clusters' datastore)")
	return []laneplan.Section{{Title: "install (kind substrate; the existing substrate runs the gates only)", Lines: install}}
}

func gateLine(p Pinned) string {
	var parts []string
	if p.Package != "" {
		parts = append(parts, "package "+p.Package)
	}
	parts = append(parts, fmt.Sprintf("%d CRDs Established", len(p.CRDs)))
	parts = append(parts, "Deployments Available in "+p.Namespace+": "+strings.Join(p.Deployments, ", "))
	if len(p.Containers) > 0 {
		parts = append(parts, "its pod runs "+strings.Join(p.Containers, ", "))
	}
	if p.SharedWebhooks {
		parts = append(parts, "webhook Services select only its pods")
	}
	if p.NoWebhooks != "" {
		parts = append(parts, "no webhook to check: "+p.NoWebhooks)
	}
	parts = append(parts, "version "+p.Pin.Version+" from "+p.Version.Describe())
	return strings.Join(parts, "; ")
}

func variant(l *lane.Lane) string {
	if l.Platform == nil || l.Platform.Variant == "" {
		return "(platform default)"
	}
	return l.Platform.Variant
}
