package realupstream

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// Binaries `make tools` builds from the upstream modules (hack/tools/capk, cabpt, helm-controller,
// virt-controller).
const (
	CAPKBinary           = "capk-manager"
	CABPTBinary          = "cabpt-manager"
	HelmControllerBinary = "helm-controller"
	VirtControllerBinary = "virt-controller"
	// InstallStrategyBinary is hack/tools/virt-controller's own program that prints what
	// virt-operator installs for a KubeVirt CR (KubeVirtInstall).
	InstallStrategyBinary = "install-strategy"
)

// Component is one upstream piece of a run: a module at a version and the sum go.sum (or
// hack/tools/build.sh, for modules only downloaded) pins for it. A run lists them in run.json.
type Component struct {
	// Name is the short name build.sh gives it (capk, cabpt, helm-controller, cozystack, ...).
	Name    string `json:"name"`
	Module  string `json:"module"`
	Version string `json:"version"`
	Sum     string `json:"sum"`
	// Binary is the program built from it, empty for a module only downloaded.
	Binary string `json:"binary,omitempty"`
}

// Build is what `make tools` made of the upstream modules: the binaries and the files kept from
// each module (CRDs, the Cozystack chart) in the tools folder.
type Build struct {
	Tools      controlplane.Tools
	Components []Component
	byName     map[string]Component
}

// components in the order versions.env lists them, with the binary each gives.
var components = []struct{ name, prefix, binary string }{
	{"capk", "CAPK", CAPKBinary},
	{"cabpt", "CABPT", CABPTBinary},
	{"helm-controller", "HELM_CONTROLLER", HelmControllerBinary},
	{"virt-controller", "VIRT_CONTROLLER", VirtControllerBinary},
	{"cozystack", "COZYSTACK", ""},
	{"source-controller", "SOURCE_CONTROLLER", ""},
	{"cilium", "CILIUM", ""},
	{"kubevirt", "KUBEVIRT", ""},
	{"cdi", "CDI", CDIControllerBinary},
}

// helpers are binaries of the tools modules' own, checked by Find with the components.
var helpers = []string{InstallStrategyBinary}

// Find reads what `make tools` recorded in the tools folder (versions.env) and checks every
// binary and kept file is there. The error names what is missing and says to run `make tools`.
func Find(tools controlplane.Tools) (*Build, error) {
	env, err := ReadEnv(filepath.Join(tools.Dir, "versions.env"))
	if err != nil {
		return nil, fmt.Errorf("upstream controllers: %w; run `make tools`", err)
	}
	b := &Build{Tools: tools, byName: map[string]Component{}}
	var missing []string
	for _, c := range components {
		comp := Component{Name: c.name, Module: env[c.prefix+"_MODULE"], Version: env[c.prefix+"_VERSION"], Sum: env[c.prefix+"_SUM"], Binary: c.binary}
		if comp.Module == "" || comp.Version == "" || comp.Sum == "" {
			missing = append(missing, fmt.Sprintf("%s_MODULE/_VERSION/_SUM in versions.env", c.prefix))
			continue
		}
		if c.binary != "" {
			if _, err := os.Stat(tools.Path(c.binary)); err != nil {
				missing = append(missing, c.binary)
			}
		}
		if _, err := os.Stat(filepath.Join(b.srcDir(comp), ".complete")); err != nil {
			missing = append(missing, "src/"+comp.Module+"@"+comp.Version)
		}
		b.Components = append(b.Components, comp)
		b.byName[c.name] = comp
	}
	for _, h := range helpers {
		if _, err := os.Stat(tools.Path(h)); err != nil {
			missing = append(missing, h)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("upstream controllers: missing in %s: %s; run `make tools` (or set E2E_TOOLS_DIR to a folder holding them)",
			tools.Dir, strings.Join(missing, ", "))
	}
	return b, nil
}

// Path is the full path of a binary.
func (b *Build) Path(binary string) string { return b.Tools.Path(binary) }

// Component is the named component (capk, cabpt, helm-controller, virt-controller, cozystack,
// source-controller, cilium, kubevirt, virt-controller-cdi).
func (b *Build) Component(name string) Component { return b.byName[name] }

// Src is the path of a file kept from the named component's module (its path in the module).
func (b *Build) Src(name string, elem ...string) string {
	return filepath.Join(append([]string{b.srcDir(b.byName[name])}, elem...)...)
}

// ChartDir is the Cozystack Kubernetes chart folder (packages/apps/kubernetes with its
// charts/cozy-lib).
func (b *Build) ChartDir() string { return filepath.Join(b.Tools.Dir, "charts", "kubernetes") }

func (b *Build) srcDir(c Component) string {
	return filepath.Join(b.Tools.Dir, "src", c.Module+"@"+c.Version)
}

// ReadEnv reads the KEY=value lines of a build's versions.env (the tools folder's, the node
// images folder's), skipping comments.
func ReadEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no %s", path)
		}
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(s.Text()), "=")
		if ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	return env, s.Err()
}
