package kind

import (
	"fmt"
	"regexp"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// ClusterEnv names the run's kind cluster (the workflows: e2e-<run id>-<lane>, one per job and
// the same across its attempts); unset, the cluster is named after the lane, as on a laptop.
const ClusterEnv = "E2E_KIND_CLUSTER"

// NetworkEnv is kind's own variable for the docker network its nodes join (kind v0.33.0
// pkg/cluster/internal/providers/docker/provider.go:70-77, marked experimental there; the
// network is created if missing, network.go:48-70); unset, "kind", which every cluster on the
// host shares. The workflows give each job its own, so the MetalLB range the harness takes
// from the network's subnet is the job's alone.
const NetworkEnv = "KIND_EXPERIMENTAL_DOCKER_NETWORK"

// defaultNetwork is kind's network when NetworkEnv is unset (network.go:47).
const defaultNetwork = "kind"

// clusterNameRE is kind's rule for a cluster name (pkg/internal/apis/config/validate.go:33);
// the length keeps its node containers' names ("<name>-control-plane") hostnames.
var clusterNameRE = regexp.MustCompile(`^[a-z0-9.-]{1,45}$`)

// ClusterName is the name of the run's kind cluster: ClusterEnv's value, else the lane's name.
func ClusterName(l *lane.Lane, getenv func(string) string) (string, error) {
	name := getenv(ClusterEnv)
	if name == "" {
		return l.Name, nil
	}
	if !clusterNameRE.MatchString(name) {
		return "", fmt.Errorf("%s=%s: a kind cluster name is at most 45 of a-z, 0-9, '.' and '-' (the workflows set e2e-<run id>-<lane>)", ClusterEnv, name)
	}
	return name, nil
}

// Network is the docker network the run's kind nodes join: NetworkEnv's value, else kind's.
func Network(getenv func(string) string) string {
	if n := getenv(NetworkEnv); n != "" {
		return n
	}
	return defaultNetwork
}

// Describe says how to reach the kept cluster.
func (s *Substrate) Describe() []string {
	return []string{
		fmt.Sprintf("kind cluster %s kept (E2E_KEEP=1)", s.name),
		"  kubeconfig: " + s.kubeconfig,
		"  kubectl --kubeconfig " + s.kubeconfig + " get helmreleases -A",
		"  tenant apiservers: LoadBalancer Services labelled " + TenantLBLabel + " in the tenant namespaces",
		fmt.Sprintf("  rerun against it: %sE2E_REUSE=1 make e2e LANE=%s (E2E_FROM_PHASE=tenant to skip the install)", s.envPrefix(), s.lane.Name),
		fmt.Sprintf("  remove it: %sbin/e2e down --lane %s", s.envPrefix(), s.lane.Name),
	}
}

// envPrefix is what a command about this cluster sets first: its name when it is not the lane's.
func (s *Substrate) envPrefix() string {
	if s.opts.Cluster == "" {
		return ""
	}
	return ClusterEnv + "=" + s.opts.Cluster + " "
}
