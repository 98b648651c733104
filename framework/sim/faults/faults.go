// Package faults is the sim substrate's fault catalogue: each fault a stand-in can inject, the
// verdict a correct harness must reach under it, and the parsing of E2E_SIM_FAULT.
package faults

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Name is a fault's name as E2E_SIM_FAULT spells it.
type Name string

const (
	DiskImportRefused  Name = "disk-import-refused"
	DiskImportStall    Name = "disk-import-stall"
	VMIUnschedulable   Name = "vmi-unschedulable"
	GuestJoinRejected  Name = "guest-join-rejected"
	HostnameMismatch   Name = "hostname-mismatch"
	NodeNotReady       Name = "node-not-ready"
	NodeTainted        Name = "node-tainted"
	ClusterDNSMismatch Name = "cluster-dns-mismatch"
	MHCReplacement     Name = "mhc-replacement"
	APIServerTransient Name = "apiserver-transient"
)

// Fault is one catalogue entry.
type Fault struct {
	Name Name
	// What the stand-ins do.
	Effect string
	// Passes is true for faults a correct harness absorbs (the run stays green).
	Passes bool
	// Class and Stage are the verdict a correct harness reaches on each targeted pool.
	Class verdict.Class
	Stage join.Stage
	// Terminal faults must be reported within seconds of becoming observable; the others end at
	// the pools phase deadline.
	Terminal bool
	// KairosOnly faults target only pools on a Kairos class by default (kubeadm join specifics).
	KairosOnly bool
}

var catalogue = []Fault{
	{DiskImportRefused, "the registry answers 401 to the importer: it exits with CDI's termination message and restarts (CrashLoopBackOff); the DataVolume's Running condition turns False, reason Error, message quoting the 401, and its restartCount climbs (CDI v1.64 keeps the phase ImportInProgress)", false, verdict.DiskImport, join.StageDiskImport, true, false},
	{DiskImportStall, "the import stops at 3.14% and never progresses", false, verdict.Deadline, join.StageDiskImport, false, false},
	{VMIUnschedulable, "the virt-launcher pod asks for more memory than any node has: Pending, Insufficient memory", false, verdict.VMUnschedulable, join.StageVMIRunning, true, false},
	{GuestJoinRejected, "the guest console shows the join refused (kubeadm: error execution phase preflight: couldn't validate the identity of the API Server; Talos: kubelet \"Unable to register node with API server\" err=\"Unauthorized\"); no Node registers", false, verdict.JoinRejected, join.StageJoin, true, false},
	{HostnameMismatch, "the Node registers under another name than the VMI, so it never gets a providerID", false, verdict.Identity, join.StageProviderID, true, true},
	{NodeNotReady, "the Node registers and reports Ready=False (KubeletNotReady, CNI not initialized), its Lease renewed", false, verdict.Deadline, join.StageReady, false, false},
	{NodeTainted, "the Node is Ready but carries the operator taint dedicated=infra:NoSchedule, which never goes away", false, verdict.NotSchedulable, join.StageSchedulable, true, false},
	{ClusterDNSMismatch, "the platform renders a dnsServiceIPs address no CoreDNS Service holds (base+53 of the Service CIDR; CoreDNS stays at base+10): the tenant kubelet-config's clusterDNS points nowhere", false, verdict.ClusterDNS, join.StageJoin, true, true},
	{MHCReplacement, "the first Machine of each targeted pool stalls at boot (console: waiting for the network); its MachineHealthCheck replaces it and the replacement joins; the stalled VMI's console stays served by its launcher until the VMI is deleted, then ends with the guest powering down", true, "", "", false, false},
	{APIServerTransient, "some API requests of the harness answer 500 etcdserver: leader changed", true, "", "", false, false},
}

// Catalogue lists every fault, in documentation order.
func Catalogue() []Fault { return append([]Fault(nil), catalogue...) }

// Lookup finds a fault by name.
func Lookup(n Name) (Fault, bool) {
	for _, f := range catalogue {
		if f.Name == n {
			return f, true
		}
	}
	return Fault{}, false
}

// Set is the faults selected for a run, each with the pools it targets (empty: its default targets).
type Set struct {
	selected map[Name][]string
}

// Parse reads E2E_SIM_FAULT: "<name>[@<pool>][,<name>[@<pool>]...]". Unknown names are refused
// with the catalogue listed.
func Parse(s string) (*Set, error) {
	set := &Set{selected: map[Name][]string{}}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, pool, _ := strings.Cut(item, "@")
		if _, ok := Lookup(Name(name)); !ok {
			names := make([]string, 0, len(catalogue))
			for _, f := range catalogue {
				names = append(names, string(f.Name))
			}
			return nil, fmt.Errorf("E2E_SIM_FAULT: %q is not a sim fault (catalogue: %s)", name, strings.Join(names, ", "))
		}
		targets := set.selected[Name(name)]
		if pool != "" {
			targets = append(targets, pool)
		}
		set.selected[Name(name)] = targets
	}
	return set, nil
}

// Active reports whether fault n applies to pool (a pool on a Kairos class when kairos is true).
func (s *Set) Active(n Name, pool string, kairos bool) bool {
	if s == nil {
		return false
	}
	targets, ok := s.selected[n]
	if !ok {
		return false
	}
	if len(targets) == 0 {
		f, _ := Lookup(n)
		return !f.KairosOnly || kairos
	}
	for _, t := range targets {
		if t == pool {
			return true
		}
	}
	return false
}

// Selected reports whether fault n was selected at all (for faults not tied to a pool).
func (s *Set) Selected(n Name) bool {
	if s == nil {
		return false
	}
	_, ok := s.selected[n]
	return ok
}

// Names lists the selected faults, sorted.
func (s *Set) Names() []Name {
	if s == nil {
		return nil
	}
	out := make([]Name, 0, len(s.selected))
	for n := range s.selected {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// String is the set as E2E_SIM_FAULT spells it.
func (s *Set) String() string {
	var parts []string
	for _, n := range s.Names() {
		if len(s.selected[n]) == 0 {
			parts = append(parts, string(n))
		}
		for _, p := range s.selected[n] {
			parts = append(parts, string(n)+"@"+p)
		}
	}
	return strings.Join(parts, ",")
}
