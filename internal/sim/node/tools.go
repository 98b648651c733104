package node

import (
	"path/filepath"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// Tools is the folder hack/tools/build-node.sh builds the node's own binaries into: the kubelet,
// kube-proxy and pause, kept apart from the control plane's tools so neither rebuilds the other.
type Tools struct{ Dir string }

// FindTools locates the node's binaries: $E2E_NODE_TOOLS_DIR, or the folder
// hack/tools/build-node.sh prints for this checkout. It names every missing binary and how to
// build it.
func FindTools() (Tools, error) {
	t, err := controlplane.LocateTools("E2E_NODE_TOOLS_DIR", "build-node.sh", []string{"kubelet", "kube-proxy", "pause"},
		"the real node's binaries are", "run `make node-tools` (hack/tools/build-node.sh; needs gcc for pause)")
	return Tools{Dir: t.Dir}, err
}

// Path is the full path of binary name.
func (t Tools) Path(name string) string { return filepath.Join(t.Dir, name) }
