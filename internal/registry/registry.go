// Package registry lists the harness's suites and what each needs of a lane, for lanes-check
// and the orchestrator to refuse a lane that cannot run them before anything starts.
package registry

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/laneplan"
	"github.com/cozystack/cozy-e2e/internal/sim/capacity"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/suites/kubernetes"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// Suite is one suite the harness can run, as data: its name, the phases it needs of a lane
// (its label filter there decides which specs run) and the most worker VMs it runs at once.
type Suite struct {
	Name   string
	Phases func(*lane.Lane) ([]lane.PhaseNeed, error)
	Peak   func(*lane.Lane) (kubernetes.Peak, error)
}

// Builtin are the suites of this checkout's suites/ folder.
func Builtin() []Suite {
	return []Suite{{Name: kubernetes.Name, Phases: kubernetes.Phases, Peak: kubernetes.PeakWorkers}}
}

// Of is the suite lane entry s names: a built-in one, or one with a path (a suite in a module
// of its own) that declares its phases in its suite.yaml (suiterun.NeedsFile) in its folder
// (lane.Suite.Dir: the path from the lane file that names it, as the run builds it); its peak
// is the lane's pools, every pool at once.
func Of(l *lane.Lane, s lane.Suite) (Suite, error) {
	if s.Path == "" {
		for _, b := range Builtin() {
			if b.Name == s.Name {
				return b, nil
			}
		}
		return Suite{}, fmt.Errorf("%q is not a suite of this harness (suites: %s); a suite elsewhere names its folder (suites[].path)", s.Name, kubernetes.Name)
	}
	path, err := needsFile(s)
	if err != nil {
		return Suite{}, err
	}
	n, err := suiterun.ReadNeeds(path)
	if err != nil {
		return Suite{}, err
	}
	if n.Name != s.Name {
		return Suite{}, fmt.Errorf("%s names suite %q, the lane %q", path, n.Name, s.Name)
	}
	return Suite{Name: s.Name, Phases: func(*lane.Lane) ([]lane.PhaseNeed, error) { return n.PhaseNeeds(), nil },
		Peak: func(l *lane.Lane) (kubernetes.Peak, error) { return kubernetes.PoolsAtOnce(l), nil }}, nil
}

// needsFile is the suite.yaml in suite s's folder. When there is none, it says where it
// looked, and the path that names the folder the path meant before paths were read from the
// lane file's folder (a folder of that name above it), if there is one.
func needsFile(s lane.Suite) (string, error) {
	p := filepath.Join(s.Dir(), suiterun.NeedsFile)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	hint := "; a suite's path is its folder, absolute or relative to the folder of the lane file that names it"
	if s.From() != "" {
		hint += " (" + s.From() + ")"
	}
	for d := filepath.Dir(filepath.Dir(s.From())); !filepath.IsAbs(s.Path) && s.From() != ""; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, filepath.FromSlash(s.Path), suiterun.NeedsFile)); err == nil {
			if rel, err := filepath.Rel(filepath.Dir(s.From()), filepath.Join(d, filepath.FromSlash(s.Path))); err == nil {
				hint += fmt.Sprintf(": this suite's folder is path: %s", filepath.ToSlash(rel))
			}
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("path %s is folder %s, which has no %s%s", s.Path, s.Dir(), suiterun.NeedsFile, hint)
}

// Catalog is every suite lane l runs by name, with the phases it runs in on l. A suite that
// cannot say (an unknown name, a filter that does not parse) is a need CheckSuites refuses,
// naming it.
func Catalog(l *lane.Lane) lane.SuiteCatalog {
	out := lane.SuiteCatalog{}
	for _, b := range Builtin() {
		needs, err := b.Phases(l)
		if err != nil {
			needs = []lane.PhaseNeed{{Err: err}}
		}
		out[b.Name] = needs
	}
	for _, s := range l.Suites {
		if s.Path == "" {
			continue // built in, or unknown: CheckSuites names it
		}
		reg, err := Of(l, s)
		if err != nil {
			out[s.Name] = []lane.PhaseNeed{{Err: err, Field: "path"}}
			continue
		}
		needs, err := reg.Phases(l)
		if err != nil {
			needs = []lane.PhaseNeed{{Err: err}}
		}
		out[s.Name] = needs
	}
	return out
}

// PeakWorkers is the most worker VMs the lane's suites run at once: the largest of the
// suites' own peaks, as they run one after another, each charged only for what it runs.
func PeakWorkers(l *lane.Lane) (kubernetes.Peak, error) {
	var peak kubernetes.Peak
	for _, s := range l.Suites {
		reg, err := Of(l, s)
		if err != nil {
			return kubernetes.Peak{}, err
		}
		p, err := reg.Peak(l)
		if err != nil {
			return kubernetes.Peak{}, err
		}
		if p.Workers > peak.Workers || peak.Why == "" {
			peak = kubernetes.Peak{Workers: p.Workers, Why: p.Why}
			if len(l.Suites) > 1 {
				peak.Why = "suite " + s.Name + ": " + p.Why
			}
		}
	}
	return peak, nil
}

// workerOverheadGiB is what KubeVirt adds to a worker's guest memory in its virt-launcher pod,
// rounded up: about 0.3 GiB for a 4 GiB guest of one or two vCPUs (240Mi for its processes,
// guest/512 for page tables, 8Mi a vCPU and 8Mi an IO thread, 32Mi of video RAM, 100Mi more
// for dedicated CPUs: kubevirt/kubevirt d923fdb8 pkg/hypervisor/kvm/hypervisorbackend.go:37-42,
// 69-170).
const workerOverheadGiB = 0.5

// WorkerGiB is the memory one worker VM takes on its node: its guest (tenant.NodeGroup's
// resources.memory) and KubeVirt's overhead.
func WorkerGiB() float64 { return tenant.WorkerMemoryGiB + workerOverheadGiB }

// Check holds lane l to what its suites need: the phases of Catalog and the room for their
// peak worker VMs: on a kind lane the runner's memory, on a sim lane the sim's management
// Nodes (SimWorkers). It names the lane file, line and field.
func Check(l *lane.Lane) error {
	if errs := l.CheckSuites(Catalog(l)); len(errs) > 0 {
		return errs
	}
	peak, err := PeakWorkers(l)
	if err != nil {
		return fmt.Errorf("%s: %w", l.File, err)
	}
	switch l.Substrate {
	case lane.SubstrateKind:
		if errs := l.CheckCapacity(peak.Workers, WorkerGiB(), peak.Why); len(errs) > 0 {
			return errs
		}
	case lane.SubstrateSim:
		if sw := SimWorkers(l); peak.Workers > sw.Workers {
			return l.Refuse("pools", "%d worker VMs at once (%s), each asking %s in its virt-launcher Pod, do not fit the sim's management Nodes (%s): "+
				"a worker's disk binds to the Node its temporary launcher landed on and its launcher must follow it there, so one Node may have to hold every worker at once, "+
				"and one holds %d (%s); run at most %d workers at once",
				peak.Workers, peak.Why, sw.Price, capacity.Describe(sw.Nodes), sw.Workers, sw.Why, sw.Workers)
		}
	}
	if l.Substrate == lane.SubstrateKind {
		n, err := CountNodePods(l)
		if err != nil {
			return fmt.Errorf("%s: %w", l.File, err)
		}
		if n.Counted > n.MaxPods {
			return fmt.Errorf("%s: pools: the kind node would run at least %d pods at the suites' peak, over the kubelet's maxPods %d: %s",
				l.File, n.Counted, n.MaxPods, strings.Join(n.Terms, " + "))
		}
	}
	return nil
}

// Sim is what the sim's management Nodes hold of a sim lane's workers.
type Sim struct {
	Nodes []world.NodeSpec
	// Price is the dearest of the lane's workers (a pool that logs its console adds a sidecar).
	Price capacity.Price
	// Limit is how many of them one Node holds at worst, and why.
	capacity.Limit
}

// SimWorkers is the sim's room for sim lane l's workers: the sim's Nodes (capacity.Nodes), the
// price of its dearest worker (capacity.WorkerPrice, a worker as tenant.NodeGroup renders every
// pool), and the most one Node holds (capacity.Most).
func SimWorkers(l *lane.Lane) Sim {
	cores, _ := strconv.ParseUint(tenant.WorkerCPU, 10, 32)
	guest := resource.MustParse(fmt.Sprintf("%dGi", tenant.WorkerMemoryGiB))
	s := Sim{Nodes: capacity.Nodes()}
	for _, p := range l.Pools {
		if pr := capacity.WorkerPrice(uint32(cores), guest, p.LogSerialConsole); pr.Memory.Cmp(s.Price.Memory) > 0 || pr.CPU.Cmp(s.Price.CPU) > 0 {
			s.Price = pr
		}
	}
	s.Limit = capacity.Most(s.Nodes, s.Price)
	return s
}

// WorkersLine says a lane's peak worker VMs against what holds them: a kind lane's runner
// memory, a sim lane's management Nodes; "" for an existing lane, whose cluster is its own.
func WorkersLine(l *lane.Lane) string {
	if l.Substrate == lane.SubstrateExisting {
		return ""
	}
	peak, err := PeakWorkers(l)
	if err != nil {
		return err.Error()
	}
	if l.Substrate == lane.SubstrateSim {
		sw := SimWorkers(l)
		return fmt.Sprintf("%d worker VMs at most (%s), %s each: the sim's Nodes (%s) hold %d on any one Node (%s)",
			peak.Workers, peak.Why, sw.Price, capacity.Describe(sw.Nodes), sw.Workers, sw.Why)
	}
	return fmt.Sprintf("%d worker VMs at most (%s), %.1f GiB each: %.1f of runner.memoryGiB %d",
		peak.Workers, peak.Why, WorkerGiB(), float64(peak.Workers)*WorkerGiB(), l.Runner.MemoryGiB)
}

// PerPoolLine says what the budget holds for the phases the lane's suites enter once per pool,
// beyond the phases' sum counted once: the sum with them against the job cap; "" when none.
func PerPoolLine(l *lane.Lane) string {
	more, terms := l.PerPool(Catalog(l))
	if more == 0 {
		return ""
	}
	a := l.Budget.Arithmetic()
	return fmt.Sprintf("phases %s + per-pool %s (%s) + diagnostics %s + artifacts %s + margin %s = %s of jobCap %s (headroom %s)",
		a.Phases, more, strings.Join(terms, "; "), a.Diagnostics, a.Artifacts, a.Margin, a.Total+more, a.Cap, a.Cap-a.Total-more)
}

// PlanSections are the suites' sections of a lane's plan: the per-pool phases as the budget
// holds them, the worker VMs and what holds them, the pods on a kind lane's node against the
// kubelet's maxPods, and the lifecycle phases' timeouts.
func PlanSections(l *lane.Lane) []laneplan.Section {
	var out []laneplan.Section
	if line := PerPoolLine(l); line != "" {
		out = append(out, laneplan.Section{Title: "per-pool phases", Lines: []string{line}})
	}
	if line := WorkersLine(l); line != "" {
		out = append(out, laneplan.Section{Title: "workers", Lines: append([]string{line}, NodePodsLine(l)...)})
	}
	return append(out, lifecycleSection(l)...)
}
