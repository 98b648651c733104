package node

import (
	"fmt"
	"strings"
)

// Label and Taint mark the real Node: it registers with both (the kubelet's --node-labels and
// registerWithTaints), so only a Pod that tolerates the taint lands on it and kwok, which manages
// only Nodes annotated kwok.x-k8s.io/node=fake (internal/sim/world/kwok.go, kwok v0.8.0
// --manage-nodes-with-annotation-selector, pkg/kwok/cmd/root.go:90), never plays it.
const (
	Label = "cozy-e2e.io/real-node"
	Taint = "cozy-e2e.io/real-node"
)

// layout is where everything of one node lives under its run folder.
type layout struct{ dir string }

func (l layout) path(parts ...string) string {
	return l.dir + "/" + strings.Join(parts, "/")
}

func (l layout) socket() string     { return l.path("containerd", "containerd.sock") }
func (l layout) certsD() string     { return l.path("containerd", "certs.d") }
func (l layout) cniConfDir() string { return l.path("cni", "net.d") }
func (l layout) runcRoot() string   { return l.path("containerd", "runc") }

// containerdConfig is containerd v1.6.20's configuration (version 2) for the node, every path
// under the run folder. Each CRI option is containerd v1.6.20 docs/cri/config.md's:
//   - restrict_oom_score_adj (:88-91): this host withholds CAP_SYS_RESOURCE, so a sandbox's
//     oom_score_adj of -998 is refused and runc fails ("can't get final child's PID from pipe")
//     unless it is kept at containerd's own (infra-here.md, measured);
//   - sandbox_image (:42-43): the pause image this run builds and serves (PauseRef);
//   - netns_mounts_under_state_dir (:62-65): network namespaces under the state folder, not in
//     the host's /var/run/netns;
//   - the runc runtime's Root (:233-234): runc's state under the run folder (the shim adds the
//     namespace: pkg/process/init.go:82-95), so Stop finds every container this node ran;
//   - cni bin_dir/conf_dir (:249-254): Debian's plugins (CNIBinDir) and this node's conflist;
//   - registry config_path (:316; docs/hosts.md:28-38): the local registry's mirror entries.
func containerdConfig(l layout, pauseRef string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, l.path("containerd", "root"), l.path("containerd", "state"), l.socket(), l.socket()+".ttrpc",
		l.path("containerd", "opt"), pauseRef, l.runcRoot(), CNIBinDir, l.cniConfDir(), l.certsD())
}

// cniConfig is the node's network: a Linux bridge of its own with host-local addresses from
// subnet up to rangeEnd (Debian's containernetworking-plugins 1.1.1, which speaks CNI 0.4.0),
// no masquerading (the Pods need no way out) and the address store under the run folder.
func cniConfig(bridge, subnet, rangeEnd, ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "cozy-e2e-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "rangeEnd": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`, bridge, ipamDir, subnet, rangeEnd)
}

// kubeletConfig is the kubelet's KubeletConfiguration (k8s.io/kubelet v0.35.4
// config/v1beta1/types.go) for this host, as measured here (infra-here.md): cgroup v1 needs
// failCgroupV1: false (:917-923; it defaults to true in v1.35, pkg/kubelet/apis/config/
// v1beta1/defaults.go:292-293), with the cgroupfs driver (:393) and no QoS cgroups (:388), so
// no node allocatable is enforced (:736-743: only with cgroupsPerQOS). It serves on the host's
// address (the Node's) on ports of its own with client certificates of the apiserver's CA, and
// registers with Taint.
func kubeletConfig(l layout, caFile, address string, port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
podLogsDir: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
registerNode: true
registerWithTaints:
  - key: %s
    value: "true"
    effect: NoSchedule
failSwapOn: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, l.socket(), address, port, healthzPort, l.path("kubelet", "pod-logs"), caFile, Taint)
}
