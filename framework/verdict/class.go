// Package verdict names failure classes, applies a lane's soft/hard policy and writes the
// run's verdict and reports.
package verdict

import (
	"fmt"
	"sort"
	"strings"
)

// Class is the kind of a failure: what broke, in words a maintainer can act on.
// The lane's policy decides per class whether a failure blocks (hard) or warns (soft).
type Class string

const (
	// DiskImport: the worker's system disk did not import (DataVolume failed, importer refused by the registry).
	DiskImport Class = "disk-import"
	// VMUnschedulable: the VM's launcher pod cannot be placed: it asks for more than any Node can hold.
	VMUnschedulable Class = "vm-unschedulable"
	// VMFailed: the VM failed and KubeVirt does not run it again: every start failed and
	// KubeVirt backs off (CrashLoopBackOff), or its run strategy does not restart a failed VMI.
	VMFailed Class = "vm-failed"
	// BootStall: the guest booted but did not get to the join (console silent or looping).
	BootStall Class = "boot-stall"
	// Bootstrap: the bootstrap provider did not produce bootstrap data (config failure, provider down).
	Bootstrap Class = "bootstrap"
	// JoinRejected: the guest tried to join and the tenant control plane refused it.
	JoinRejected Class = "join-rejected"
	// Identity: the Node joined under the wrong identity (name, providerID or Cluster API annotations).
	Identity Class = "identity"
	// MachineFailed: Cluster API marked the Machine failed or the infrastructure provider gave up.
	MachineFailed Class = "machine-failed"
	// NodeNotReady: the Node registered and never reported Ready.
	NodeNotReady Class = "node-not-ready"
	// NotSchedulable: the Node is Ready but a workload cannot be scheduled on it (taints, cordon).
	NotSchedulable Class = "not-schedulable"
	// ClusterDNS: the tenant kubelet configuration lacks clusterDNS, so kubeadm-joined workers get no cluster DNS.
	ClusterDNS Class = "cluster-dns"
	// ProductAssertion: the product behaved in a way the conformance contract forbids.
	ProductAssertion Class = "product-assertion"
	// Deadline: a wait ran out of its budget; the failure's stage says where it was stuck.
	Deadline Class = "deadline"
	// InfrastructureDegraded: the machine running the lane is too slow or broken to judge the product.
	InfrastructureDegraded Class = "infrastructure-degraded"
	// Install: a component or the platform did not install (gate not met).
	Install Class = "install"
	// Preflight: the machine lacks something the lane needs (docker, KVM, memory); exit code 2.
	Preflight Class = "preflight"
	// Configuration: the lane file or the invocation is wrong; exit code 2.
	Configuration Class = "configuration"
	// Teardown: the run could not remove what it created (leaked VMs, PVCs).
	Teardown Class = "teardown"
	// Remediation: a worker's MachineHealthCheck did not get it replaced (it was never marked,
	// or marked and never remediated).
	Remediation Class = "remediation"
	// Leak: something a removed worker or a deleted tenant was made of stays on the management
	// cluster (held by a finalizer no controller removes, or never deleted).
	Leak Class = "leak"
	// Platform: a platform component the join depends on (KubeVirt, CDI, a Cluster API
	// provider, Kamaji, Flux) was unavailable when a pool's wait ran out: the platform under the
	// pools failed, not the pool; the failure names the component and its last words.
	Platform Class = "platform"
	// Harness: the harness itself failed (a bug here, not in the product).
	Harness Class = "harness"
)

var known = map[Class]string{
	DiskImport:             "the worker's system disk did not import",
	VMUnschedulable:        "the worker VM's launcher asks for more than any Node can hold",
	VMFailed:               "the worker VM failed and KubeVirt does not run it again",
	BootStall:              "the guest did not get from boot to join",
	Bootstrap:              "the bootstrap provider produced no bootstrap data",
	JoinRejected:           "the tenant control plane refused the worker's join",
	Identity:               "the Node joined under the wrong identity",
	MachineFailed:          "Cluster API or the infrastructure provider gave up on the Machine",
	NodeNotReady:           "the Node never reported Ready",
	NotSchedulable:         "the Node is Ready but cannot take a workload",
	ClusterDNS:             "the tenant kubelet configuration has no clusterDNS",
	ProductAssertion:       "the product broke the conformance contract",
	Deadline:               "a wait ran out of its budget",
	InfrastructureDegraded: "the machine is too degraded to judge the product",
	Install:                "a component or the platform did not install",
	Preflight:              "the machine lacks something the lane needs",
	Configuration:          "the lane file or the invocation is wrong",
	Teardown:               "the run could not remove what it created",
	Remediation:            "an unhealthy worker was not replaced by its MachineHealthCheck",
	Leak:                   "a removed worker or a deleted tenant left objects behind",
	Platform:               "a platform component the pools depend on was unavailable while they were stuck",
	Harness:                "the harness itself failed",
}

// Known reports whether c is a class this harness produces.
func (c Class) Known() bool {
	_, ok := known[c]
	return ok
}

// Describe is one line saying what the class means.
func (c Class) Describe() string {
	if d, ok := known[c]; ok {
		return d
	}
	return "unknown class"
}

// Classes lists every known class, sorted.
func Classes() []Class {
	out := make([]Class, 0, len(known))
	for c := range known {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ParseClass returns the class named s, or an error listing the known ones.
func ParseClass(s string) (Class, error) {
	c := Class(s)
	if c.Known() {
		return c, nil
	}
	names := make([]string, 0, len(known))
	for _, k := range Classes() {
		names = append(names, string(k))
	}
	return "", fmt.Errorf("%q is not a failure class (known: %s)", s, strings.Join(names, ", "))
}
