// Package registry lists the harness's suites and what each needs of a lane, for lanes-check
// and the orchestrator to refuse a lane that cannot run them before anything starts.
package registry

import (
	"fmt"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/suites/kubernetes"
)

// Catalog is every suite by name (suites/<name>) with the phases it runs in on lane l: its
// label filter there decides which specs run, and so which phases it needs. A filter that
// does not parse is a need CheckSuites refuses, naming it.
func Catalog(l *lane.Lane) lane.SuiteCatalog {
	needs, err := kubernetes.Phases(l)
	if err != nil {
		needs = []lane.PhaseNeed{{Err: err}}
	}
	return lane.SuiteCatalog{kubernetes.Name: needs}
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

// PeakWorkers is the most worker VMs the lane's suites run at once.
func PeakWorkers(l *lane.Lane) (kubernetes.Peak, error) { return kubernetes.PeakWorkers(l) }

// Check holds lane l to what its suites need: the phases of Catalog and, on a kind lane, the
// runner memory for their peak worker VMs. It names the lane file, line and field.
func Check(l *lane.Lane) error {
	if errs := l.CheckSuites(Catalog(l)); len(errs) > 0 {
		return errs
	}
	peak, err := PeakWorkers(l)
	if err != nil {
		return fmt.Errorf("%s: %w", l.File, err)
	}
	if errs := l.CheckCapacity(peak.Workers, WorkerGiB(), peak.Why); len(errs) > 0 {
		return errs
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

// WorkersLine says a kind lane's peak worker VMs against its runner's memory; "" for other
// substrates, whose runner holds no worker VM.
func WorkersLine(l *lane.Lane) string {
	if l.Substrate != lane.SubstrateKind {
		return ""
	}
	peak, err := PeakWorkers(l)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d worker VMs at most (%s), %.1f GiB each: %.1f of runner.memoryGiB %d",
		peak.Workers, peak.Why, WorkerGiB(), float64(peak.Workers)*WorkerGiB(), l.Runner.MemoryGiB)
}

// PlanSections are the suites' sections of a lane's plan: the worker VMs of a kind lane and the
// pods on its node against the kubelet's maxPods, and the lifecycle phases' timeouts.
func PlanSections(l *lane.Lane) []lane.PlanSection {
	var out []lane.PlanSection
	if line := WorkersLine(l); line != "" {
		out = append(out, lane.PlanSection{Title: "workers", Lines: append([]string{line}, NodePodsLine(l)...)})
	}
	return append(out, lifecycleSection(l)...)
}
