package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Tools is the folder `make tools` builds into.
type Tools struct{ Dir string }

// Binaries every control plane needs.
var required = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"}

// FindTools locates the built binaries: $E2E_TOOLS_DIR, or the folder hack/tools/build.sh
// prints for this checkout. It names every missing binary and how to build it.
func FindTools() (Tools, error) {
	dir := os.Getenv("E2E_TOOLS_DIR")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return Tools{}, err
		}
		out, err := exec.Command(filepath.Join(root, "hack", "tools", "build.sh"), "--print").Output()
		if err != nil {
			return Tools{}, fmt.Errorf("locating the tools folder (hack/tools/build.sh --print): %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	t := Tools{Dir: dir}
	var missing []string
	for _, b := range required {
		if _, err := os.Stat(t.Path(b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("control plane binaries missing in %s: %s; run `make tools` (or set E2E_TOOLS_DIR to a folder holding them)",
			dir, strings.Join(missing, ", "))
	}
	return t, nil
}

// Path is the full path of binary name.
func (t Tools) Path(name string) string { return filepath.Join(t.Dir, name) }

// KwokStages is the kwok stage configuration written next to the binaries.
func (t Tools) KwokStages() string { return filepath.Join(t.Dir, "kwok-stages.yaml") }

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "tools", "build.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the project root (hack/tools/build.sh) above the working directory; set E2E_TOOLS_DIR")
		}
		dir = parent
	}
}
