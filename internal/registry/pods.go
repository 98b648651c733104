package registry

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
	"github.com/cozystack/cozy-e2e/internal/install/catalog"
	"github.com/cozystack/cozy-e2e/suites/kubernetes"
)

// NodePods is what the harness can count of the pods a kind lane runs on its one node at the
// suites' peak, each term with where it comes from, against the kubelet's maxPods.
type NodePods struct {
	MaxPods int
	Counted int
	Terms   []string
	// Uncounted says what is on the node and not counted: the platform's Packages, whose pods
	// the install catalogue does not list.
	Uncounted string
}

// CountNodePods counts lane l's pods on its kind node: the Deployments the install gates wait on
// (internal/install/catalog, at least one pod each), the root tenant's etcd, each tenant
// cluster's control plane and controllers as the Kubernetes chart renders them on the
// management cluster, and the worker VMs at the suites' peak, each a virt-launcher pod and, while
// its disk imports, a CDI importer pod.
func CountNodePods(l *lane.Lane) (NodePods, error) {
	n := NodePods{MaxPods: assumptions.KubeletMaxPods}
	pinned, err := catalog.ForLane(l)
	if err != nil {
		return n, err
	}
	deployments := 0
	for _, p := range pinned {
		deployments += len(p.Deployments)
	}
	n.add(deployments, fmt.Sprintf("%d for the %d Deployments the install gates wait on (at least one pod each)", deployments, deployments))
	n.add(assumptions.RootEtcdReplicas, fmt.Sprintf("%d for the root tenant's etcd", assumptions.RootEtcdReplicas))
	clusters, err := tenantClusters(l)
	if err != nil {
		return n, err
	}
	perCluster := assumptions.TenantControlPlaneReplicas + assumptions.TenantChartSingletons
	n.add(len(clusters)*perCluster, fmt.Sprintf("%d x %d for the tenant clusters %s (each %d control plane replicas, a cloud controller manager, a CSI controller, a cluster autoscaler)",
		len(clusters), perCluster, strings.Join(clusters, " and "), assumptions.TenantControlPlaneReplicas))
	peak, err := PeakWorkers(l)
	if err != nil {
		return n, err
	}
	n.add(2*peak.Workers, fmt.Sprintf("2 x %d for the worker VMs at the peak (each a virt-launcher pod, and a CDI importer pod while its disk imports)", peak.Workers))
	packages, err := enabledPackages(l)
	if err != nil {
		return n, err
	}
	n.Uncounted = fmt.Sprintf("the pods of the platform's %d Packages (isp-full-generic at %s less the %d the lane disables: kube-ovn, Cilium, monitoring, seaweedfs, ...), which the install catalogue does not list by pod",
		packages, assumptions.CozystackMain[:12], len(l.Platform.DisabledPackages))
	return n, nil
}

func (n *NodePods) add(count int, why string) {
	n.Counted += count
	n.Terms = append(n.Terms, why)
}

// tenantClusters are the conformance clusters of the lane's pools, and the pool-less cluster
// the refusals run on when the lane runs them.
func tenantClusters(l *lane.Lane) ([]string, error) {
	seen := map[string]bool{}
	for _, p := range l.Pools {
		seen[p.ClusterName()] = true
	}
	sel, err := kubernetes.Select(l)
	if err != nil {
		return nil, err
	}
	if sel.Refusals {
		seen[lane.RefusalCluster] = true
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

// enabledPackages is how many Packages the platform emits at main for the lane's variant, less
// the ones the lane disables.
func enabledPackages(l *lane.Lane) (int, error) {
	graphs, err := assumptions.Graphs()
	if err != nil {
		return 0, err
	}
	g := graphs[0]
	n := len(g.Packages)
	if l.Platform != nil {
		for _, d := range l.Platform.DisabledPackages {
			if g.Has(d.Name) {
				n--
			}
		}
	}
	return n, nil
}

// NodePodsLine says the count against maxPods, for the plan.
func NodePodsLine(l *lane.Lane) []string {
	n, err := CountNodePods(l)
	if err != nil {
		return []string{"pods not counted: " + err.Error()}
	}
	return []string{
		fmt.Sprintf("pods on the kind node against kubelet maxPods %d (default %d): %d counted at the suites' peak, %s",
			n.MaxPods, assumptions.KubeletDefaultMaxPods, n.Counted, strings.Join(n.Terms, " + ")),
		fmt.Sprintf("  leaving %d of %d for what is not counted: %s", n.MaxPods-n.Counted, n.MaxPods, n.Uncounted),
	}
}
