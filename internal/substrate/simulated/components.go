package simulated

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

var _ substrate.Inventory = (*Substrate)(nil)

// Components lists the real upstream components a sim run uses, each as its binary or this
// program records it (Go build information: main module, version, sum): the control plane and
// kwok (processes, for the management and every tenant cluster), kubectl (the Kubernetes chart's
// Job scripts run it), Cluster API (in process), CAPK, the Talos bootstrap provider,
// helm-controller and KubeVirt's virt-controller (processes); and the modules only read, as make
// tools pinned them: the Cozystack release whose Kubernetes chart, CRDs and instance types the
// sim uses, and the modules other CRDs come from.
func (s *Substrate) Components() ([]substrate.Component, error) {
	tools, err := controlplane.FindTools()
	if err != nil {
		return nil, err
	}
	b, err := realupstream.Find(tools)
	if err != nil {
		return nil, err
	}
	var out []substrate.Component
	for _, b := range []struct{ name, binary, use string }{
		{"etcd", "etcd", "process"},
		{"kube-apiserver", "kube-apiserver", "process"},
		{"kube-controller-manager", "kube-controller-manager", "process"},
		{"kube-scheduler", "kube-scheduler", "process"},
		{"kwok", "kwok", "process"},
		{"kubectl", "kubectl", "process, in the Kubernetes chart's Jobs"},
		{"capk", "capk-manager", "process"},
		{"cabpt", "cabpt-manager", "process"},
		{"helm-controller", "helm-controller", "process"},
		{"cdi-controller", "cdi-controller", "process, in network and mount namespaces of its own"},
		{"virt-controller", "virt-controller", "process (configured by the platform's KubeVirt CR)"},
	} {
		info, err := buildinfo.ReadFile(tools.Path(b.binary))
		if err != nil {
			return nil, fmt.Errorf("sim: %s: %w", b.binary, err)
		}
		out = append(out, substrate.Component{Name: b.name, Module: info.Main.Path, Version: info.Main.Version, Sum: info.Main.Sum,
			Use: b.use + " (" + b.binary + ")"})
	}
	capi, err := dependency("sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, err
	}
	capi.Name, capi.Use = "cluster-api", "in process (Cluster, MachineDeployment, MachineSet, Machine, MachineHealthCheck controllers and webhooks)"
	out = append(out, capi)
	for _, m := range []struct{ name, use string }{
		{"cozystack", "the Kubernetes chart (through helm-controller), the platform's CRDs and instance types"},
		{"source-controller", "CRDs (ExternalArtifact, HelmChart, OCIRepository)"},
		{"cilium", "CRD (CiliumNetworkPolicy)"},
		{"kubevirt", "virt-operator's install strategy for the platform's KubeVirt CR (install-strategy, built from this module by hack/tools/virt-controller): KubeVirt's CRDs and virt-controller's arguments"},
	} {
		c := b.Component(m.name)
		out = append(out, substrate.Component{Name: m.name, Module: c.Module, Version: c.Version, Sum: c.Sum, Use: m.use})
	}
	if s.lane.Sim != nil && s.lane.Sim.RealNode {
		nodes, err := NodeComponents(ThisNodeHost())
		if err != nil {
			return nil, err
		}
		out = append(out, nodes...)
	}
	return out, nil
}

// dependency is module path as this program was built with it: from its build information, or,
// in a test binary, which carries none of its dependencies, from the go.mod and go.sum of the
// module it is built in.
func dependency(path string) (substrate.Component, error) {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == path {
				if d.Replace != nil {
					d = d.Replace
				}
				return substrate.Component{Module: d.Path, Version: d.Version, Sum: d.Sum}, nil
			}
		}
	}
	return fromGoSum(path)
}

// fromGoSum reads path's required version in the nearest go.mod above the working folder and its
// sum in the go.sum beside it.
func fromGoSum(path string) (substrate.Component, error) {
	dir, err := os.Getwd()
	if err != nil {
		return substrate.Component{}, err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(path) + `\s+(v\S+)`).FindSubmatch(mod)
			if m == nil {
				return substrate.Component{}, fmt.Errorf("sim: %s/go.mod does not require %s", dir, path)
			}
			version := string(m[1])
			sums, err := os.ReadFile(filepath.Join(dir, "go.sum"))
			if err != nil {
				return substrate.Component{}, err
			}
			h := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(path+" "+version) + ` (h1:\S+)$`).FindSubmatch(sums)
			if h == nil {
				return substrate.Component{}, fmt.Errorf("sim: %s/go.sum has no sum for %s %s", dir, path, version)
			}
			return substrate.Component{Module: path, Version: version, Sum: string(h[1])}, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return substrate.Component{}, fmt.Errorf("sim: this program is not built with %s, and no go.mod is above %s", path, dir)
		}
		dir = parent
	}
}
