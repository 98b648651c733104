package controlplane

import (
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
	return LocateTools("E2E_TOOLS_DIR", "build.sh", required,
		"control plane binaries", "run `make tools` (or set E2E_TOOLS_DIR to a folder holding them)")
}

// LocateTools finds a tools folder: $env, or the folder hack/tools/<script> --print names for
// this checkout, and checks that it holds binaries; what names them and todo say what is missing
// and how to build it.
func LocateTools(env, script string, binaries []string, what, todo string) (Tools, error) {
	dir := os.Getenv(env)
	if dir == "" {
		root, err := moduleRoot(script, env)
		if err != nil {
			return Tools{}, err
		}
		out, err := exec.Command(filepath.Join(root, "hack", "tools", script), "--print").Output()
		if err != nil {
			return Tools{}, fmt.Errorf("locating the tools folder (hack/tools/%s --print): %w", script, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	t := Tools{Dir: dir}
	var missing []string
	for _, b := range binaries {
		if _, err := os.Stat(t.Path(b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("%s missing in %s: %s; %s", what, dir, strings.Join(missing, ", "), todo)
	}
	return t, nil
}

// Path is the full path of binary name.
func (t Tools) Path(name string) string { return filepath.Join(t.Dir, name) }

// KwokStages is the kwok stage configuration written next to the binaries.
func (t Tools) KwokStages() string { return filepath.Join(t.Dir, "kwok-stages.yaml") }

func moduleRoot(script, env string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "tools", script)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("cannot find the project root (hack/tools/%s) above the working directory; set %s", script, env)
		}
		dir = parent
	}
}
