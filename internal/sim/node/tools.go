package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Tools is the folder hack/tools/build-node.sh builds the node's own binaries into: the kubelet
// and pause, kept apart from the control plane's tools so neither rebuilds the other.
type Tools struct{ Dir string }

// FindTools locates the node's binaries: $E2E_NODE_TOOLS_DIR, or the folder
// hack/tools/build-node.sh prints for this checkout. It names every missing binary and how to
// build it.
func FindTools() (Tools, error) {
	dir := os.Getenv("E2E_NODE_TOOLS_DIR")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return Tools{}, err
		}
		out, err := exec.Command(filepath.Join(root, "hack", "tools", "build-node.sh"), "--print").Output()
		if err != nil {
			return Tools{}, fmt.Errorf("locating the node tools folder (hack/tools/build-node.sh --print): %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	t := Tools{Dir: dir}
	var missing []string
	for _, b := range []string{"kubelet", "pause"} {
		if _, err := os.Stat(t.Path(b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("the real node's binaries are missing in %s: %s; run `make node-tools` (hack/tools/build-node.sh; needs gcc for pause)",
			dir, strings.Join(missing, ", "))
	}
	return t, nil
}

// Path is the full path of binary name.
func (t Tools) Path(name string) string { return filepath.Join(t.Dir, name) }

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "tools", "build-node.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the project root (hack/tools/build-node.sh) above the working directory; set E2E_NODE_TOOLS_DIR")
		}
		dir = parent
	}
}
