// Package node is the sim's real Node: a real kubelet v1.35.4 built from k8s.io/kubernetes
// (hack/tools/build-node.sh) with Debian's containerd and runc, each a process of its own under
// a run folder, registered with the sim's management apiserver beside the Nodes kwok plays, and a
// local OCI registry (go-containerregistry's pkg/registry, in process) that serves the images
// built here under the names the Pods use, through a containerd mirror entry.
package node

// CNIBinDir is where Debian's containernetworking-plugins installs the CNI plugins (not
// /opt/cni/bin, containerd's default).
const CNIBinDir = "/usr/lib/cni"
