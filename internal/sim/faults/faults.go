// Package faults is the sim substrate's fault catalogue: each fault a stand-in can inject, the
// upstream signal its effect imitates, and the parsing of E2E_SIM_FAULT.
package faults

import (
	"fmt"
	"sort"
	"strings"
)

// Name is a fault's name as E2E_SIM_FAULT spells it.
type Name string

const (
	DiskImportRefused   Name = "disk-import-refused"
	DiskImportStall     Name = "disk-import-stall"
	DiskImportOOM       Name = "disk-import-oom"
	VMIUnschedulable    Name = "vmi-unschedulable"
	VMICrashOnce        Name = "vmi-crash-once"
	VMICrashLoop        Name = "vmi-crashloop"
	GuestJoinRejected   Name = "guest-join-rejected"
	ProviderIDMissing   Name = "provider-id-missing"
	NodeNotReady        Name = "node-not-ready"
	NodeTainted         Name = "node-tainted"
	ClusterDNSMismatch  Name = "cluster-dns-mismatch"
	KairosConfigRefused Name = "kairos-config-refused"
	MHCReplacement      Name = "mhc-replacement"
	APIServerTransient  Name = "apiserver-transient"
	MHCBlocked          Name = "mhc-blocked"
	ScaleDownStuck      Name = "scale-down-stuck"
	Leak                Name = "leak"
	BootstrapTransient  Name = "bootstrap-transient"
	MachineSetTransient Name = "machineset-transient"
	ProviderIDLate      Name = "providerid-late"
	NodeLabelRemoved    Name = "node-label-removed"
	ControllerKilled    Name = "controller-killed"
	ControllerCrashLoop Name = "controller-crashloop"
	// RegistryUnavailableOnce and the guest faults act on a lane with a real Node only
	// (RealNodeOnly).
	RegistryUnavailableOnce  Name = "registry-unavailable-once"
	GuestCAWrong             Name = "guest-ca-wrong"
	GuestTokenExpired        Name = "guest-token-expired"
	GuestEndpointUnreachable Name = "guest-endpoint-unreachable"
	GuestKubeletCrashOnce    Name = "guest-kubelet-crash-once"
)

// Components are the upstream controllers a sim world runs as processes, as the controller
// faults name them after "@" (where other faults name a pool).
var components = []string{"capk", "cabpt", "helm-controller", "cdi-controller", "virt-controller"}

// RealNodeOnly reports whether fault n acts only in a world with a real Node (a lane with
// sim.realNode), on what runs there for real; test/simlane's real-Node lane test exercises it.
func RealNodeOnly(n Name) bool {
	switch n {
	case RegistryUnavailableOnce, GuestCAWrong, GuestTokenExpired, GuestEndpointUnreachable, GuestKubeletCrashOnce:
		return true
	}
	return false
}

// OnComponent reports whether fault n names a controller, not a pool, after "@".
func OnComponent(n Name) bool { return n == ControllerKilled || n == ControllerCrashLoop }

// Fault is one catalogue entry. The verdict a correct harness reaches under each fault is not
// the sim's to say: test/simlane holds those expectations.
type Fault struct {
	Name Name
	// Effect is what the stand-ins do.
	Effect string
	// Imitates is the upstream signal the effect shows through (repository, tag, path), or
	// "sim only" when no upstream component is known to show it so.
	Imitates string
	// Passes is true for faults a correct harness absorbs (the run stays green).
	Passes bool
	// KairosOnly faults target only pools on a Kairos class by default (kubeadm join specifics).
	KairosOnly bool
}

var catalogue = []Fault{
	{DiskImportRefused, "the registry answers 401 to the importer: the importer container exits 1 with \"Unable to process data: ...401 Unauthorized\" as its termination message and the kubelet restarts it after a back-off (CrashLoopBackOff); the real cdi-controller copies the terminated state's message to the DataVolume's Running condition (False) and retries without end",
		"CDI v1.64.0 cmd/cdi-importer/importer.go:187-196 (the importer's exit); pkg/controller/util.go:308-380 and pkg/controller/datavolume/conditions.go:68-82 (run by the real cdi-controller)", false, false},
	{DiskImportStall, "the importer stops at 3.14% and makes no more progress, running on",
		"the importer's progress (cmd/cdi-importer, its Prometheus progress reader) that stops moving; the real cdi-controller keeps the DataVolume ImportInProgress", false, false},
	{DiskImportOOM, "the importer's page cache runs it over its memory limit while it writes with buffered I/O: the kernel kills it (exit 137, OOMKilled); the real cdi-controller deletes the Pod and starts another with direct I/O (CACHE_MODE=TRYNONE), which imports",
		"CDI v1.64.0 pkg/controller/import-controller.go:393-398 (OOMKilled: cdi.kubevirt.io/storage.pod.requiresDirectIO, the Pod deleted, :463-473) and :666-667 (the next Pod's CACHE_MODE=TRYNONE)", true, false},
	{VMIUnschedulable, "each VirtualMachine of the pool asks for more guest memory than any management Node has (twice the largest allocatable), as if the platform had rendered it so: the real virt-controller's launcher asks for it and stays Pending, Insufficient memory",
		"kube-scheduler's PodScheduled=False reason Unschedulable on the launcher (the real scheduler in the sim); the real virt-controller v1.8.4 sizes the launcher (pkg/virt-controller/services/renderresources.go) and copies the condition onto the VMI (pkg/virt-controller/watch/vmi/lifecycle.go lines 386-394)", false, false},
	{VMICrashOnce, "the domain of the pool's first running VMI crashes once, a moment after it started: virt-handler's stand-in fails the VMI, the real VM controller replaces it (runStrategy Always) and the new one joins",
		"kubevirt v1.8.4 pkg/virt-handler/vm.go lines 2198-2201 (a crashed domain fails its VMI) and pkg/virt-controller/watch/vm/vm.go lines 978-1036 (runStrategy Always deletes a final VMI and starts a new one; a VMI that ran counts no start failure, lines 1536-1554)", true, false},
	{VMICrashLoop, "every domain of the pool crashes as it starts: each VMI fails before it ever runs, and the real VM controller counts start failures, backs off and shows printableStatus CrashLoopBackOff",
		"kubevirt v1.8.4 pkg/virt-handler/vm.go lines 2198-2201; pkg/virt-controller/watch/vm/vm.go lines 1476-1503 (the backoff), 1574-1601 (start failures), 2557-2580 (CrashLoopBackOff)", false, false},
	{GuestJoinRejected, "the control plane refuses the kubelet's bootstrap credentials: no CSR and no Node. A Talos guest's kubelet presents a bootstrap token the tenant does not hold (whichever renders its pool: the real chart or the model of #4911), and the tenant apiserver itself answers the kubelet's CSR 401; a Talos console prints nothing of it. A kubeadm (Kairos) join, modelled, prints its error on the console (error execution phase preflight: couldn't validate the identity of the API Server)",
		"kubeadm's error text (k8s.io/kubernetes v1.35.4 cmd/kubeadm/app/cmd/phases/workflow/runner.go:262, cmd/kubeadm/app/discovery/discovery.go:46); that it reaches a Kairos serial console: the seed (#4911), not readable upstream", false, false},
	{ProviderIDMissing, "the Node registers under a name of its own without a providerID, so none ever comes (CAPK patches only the Node named like the VMI): a Talos guest to which no host name reaches names itself talos-<3>-<3>, a Kairos bootstrap data without --provider-id",
		"CAPK v0.1.10 controllers/kubevirtmachine_controller.go:389-434 (providerID patched onto the Node of the KubevirtMachine's name only); kubelet sets spec.providerID only when it registers", false, false},
	{NodeNotReady, "the Node registers and reports Ready=False (KubeletNotReady, CNI not initialized), its Lease renewed",
		"kubelet Ready=False reason KubeletNotReady with the runtime's network message (kubelet's node status)", false, false},
	{NodeTainted, "the Node is Ready but carries the operator taint dedicated=infra:NoSchedule, which never goes away",
		"a Node taint (core/v1); the startup taints that go away are named in docs/signals.md", false, false},
	{ClusterDNSMismatch, "the platform renders a dnsServiceIPs address no CoreDNS Service holds (base+53 of the Service CIDR; CoreDNS stays at base+10): the tenant kubelet-config's clusterDNS points nowhere",
		"Kamaji writes the tenant kube-system/kubelet-config clusterDNS from dnsServiceIPs (clastix/kamaji internal/kubeadm/uploadconfig.go:84); the mismatch itself is a product misconfiguration, sim only", false, true},
	{KairosConfigRefused, "the pool's KairosConfigTemplate asks for a control-plane role on the kubeadm path, which the provider's webhook refuses (workers only): Cluster API cannot clone a KairosConfig, so no Machine appears",
		"the Kairos provider's validating webhook, failurePolicy Fail (kairos-io/cluster-api-provider-kairos config/webhook/manifests.yaml:69-88); Cluster API v1.13 MachineSet MachinesCreated=False reason BootstrapTemplateCloningFailed (internal/controllers/machineset/machineset_controller.go:865)", false, true},
	{MHCReplacement, "the first Machine of each targeted pool stalls at boot (console: waiting for the network); its MachineHealthCheck replaces it and the replacement joins; the stalled VMI's console stays served by its launcher until the VMI is deleted, then ends with the guest powering down. It needs MachineHealthCheck values of its own, set by its own copy of the sim lane (sim.machineHealthCheck: nodeStartupTimeout 90s, maxUnhealthy 100%, a 4m pools ceiling; test/simlane): under the pinned chart's (10m, 50%), which the sim lane renders, nothing is replaced within a run, and a one-machine pool never",
		"the real Cluster API MachineHealthCheck and MachineSet controllers (v1.13.6 in process) replace the Machine", true, false},
	{APIServerTransient, "some API requests of the harness answer 500 etcdserver: leader changed",
		"kube-apiserver's answer during an etcd leader election (the etcd error text); injected by the sim's proxy, sim only as a timing", true, false},
	{MHCBlocked, "when a worker of the targeted pool powers off (the remediation spec stops its VM), the kubelet of a second worker of the pool goes silent too while its VM runs on: its Node turns Unknown as well, two of the pool's two Machines are unhealthy, above the chart's maxUnhealthy 50% (one of two), and the MachineHealthCheck marks them but replaces neither",
		"a second Node lost at once (its kubelet renews no Lease; the real node lifecycle controller marks it Unknown, kubernetes v1.35.4 pkg/controller/nodelifecycle/node_lifecycle_controller.go:930-940); the real Cluster API v1.13.6 MachineHealthCheck controller then short-circuits remediation (RemediationAllowed=False reason TooManyUnhealthy, internal/controllers/machinehealthcheck/machinehealthcheck_controller.go:290-345, 744-753) under the chart's own maxUnhealthy (cozystack v1.6.1 packages/apps/kubernetes/values.yaml:307-309)", false, false},
	{ScaleDownStuck, "every VirtualMachine of the targeted pool carries a finalizer no controller removes: a worker removed by a scale-down leaves its VM, and with it its DataVolume and PVC (its Machine, KubevirtMachine and Node go: CAPK lets the KubevirtMachine go once it asked for the VM's deletion, cluster-api-provider-kubevirt v0.1.10 controllers/kubevirtmachine_controller.go:467-480)",
		"the apiserver keeps an object with a deletionTimestamp until metadata.finalizers is empty (k8s.io/apiserver v0.35.4 pkg/registry/generic/registry/store.go:1044-1130); the finalizer's absent controller is sim only", false, false},
	{Leak, "every worker disk's PVC carries a finalizer no controller removes: deleting the app leaves the PVCs, and deleting the tenant leaves them and its namespace Terminating",
		"the apiserver keeps an object with a deletionTimestamp until metadata.finalizers is empty, and the namespace controller keeps a namespace until its content is gone (kubernetes v1.35.4 pkg/controller/namespace/deletion/namespaced_resources_deleter.go:442-480, condition NamespaceFinalizersRemaining); a PVC so held is what external-snapshotter's snapshot.storage.kubernetes.io/pvc-as-source-protection leaves when its controller is gone; here the finalizer's absent controller is sim only", false, false},
	{BootstrapTransient, "the targeted pool's KairosConfigTemplate names its user's password by userPasswordSecretRef, and that Secret is written 10 s after a KairosConfig first found it missing: the Kairos provider's stand-in sets failureReason BootstrapDataSecretGenerationFailed with the provider's words, and clears it once the Secret is there",
		"kairos-io/cluster-api-provider-kairos main c300236 internal/controllers/bootstrap/kairosconfig_controller.go:206-218 (failureReason on any error of a reconcile), :231-236 (cleared on the next success), :926-960 (the password Secret read); api/bootstrap/v1beta2/kairosconfig_types.go:516-521 (\"an ongoing failure, not a terminal one\")", true, true},
	{MachineSetTransient, "the Kairos provider's validating webhook cannot be called for the targeted pool's KairosConfigs during the 20 s after the first one is cloned (the connection ends without an answer): the apiserver fails the clone with \"failed calling webhook\", Cluster API marks the MachineSet MachinesCreated=False BootstrapTemplateCloningFailed with that message, tries again with its backoff and creates the Machine once the webhook answers",
		"k8s.io/apiserver v0.35.4 pkg/admission/plugin/webhook/validating/dispatcher.go:199-219, 295-312 (an uncallable webhook under failurePolicy Fail is an internal error); sigs.k8s.io/cluster-api v1.13.6 internal/controllers/machineset/machineset_controller.go:859-870 (the condition and the returned error), :1444-1462 (True again)", true, true},
	{ProviderIDLate, "the targeted pool's Kairos worker is named by the provider's default hostnamePrefix metal- and registers without a providerID; 10 s after its Node registered, its post-bootstrap step patches kubevirt://<vmi> onto it, as the provider's template does once the Node is there (CAPK patches only a Node named like the VMI)",
		"kairos-io/cluster-api-provider-kairos main c300236 internal/bootstrap/templates/k0s_kairos_cloud_config_capk.yaml.tmpl:527-567 (waits for the Node, then kubectl patch node $(hostname) spec.providerID, 30 tries 5 s apart); cluster-api-provider-kubevirt v0.1.10 controllers/kubevirtmachine_controller.go:389-434", true, true},
	{NodeLabelRemoved, "right after the Node registers, a labeller in the tenant cluster removes its kubernetes.io/hostname label; the join is unaffected",
		"the kubelet sets kubernetes.io/hostname, os and arch when it registers (kubernetes v1.35.4 pkg/kubelet/kubelet_node_status.go:301-308) and puts os and arch back at every status update (:560-575), but hostname only when it registers again (updateDefaultLabels, :129, :230-240); the labeller is sim only", false, false},
	{ControllerKilled, "the named controller's process is killed (SIGKILL) once, when the first VirtualMachine of the run exists: its supervisor starts it again at once, as a kubelet restarts a first exit, and it takes its work (virt-controller: its lease) back; the run passes and shows the restart",
		"kubernetes v1.35.4 pkg/kubelet/kubelet.go:162-170,1007-1012 (the kubelet's restart back-off) and pkg/kubelet/kuberuntime/kuberuntime_manager.go:1837-1853; the kill is sim only", true, false},
	{ControllerCrashLoop, "from the moment the first VirtualMachine of the run exists, the named controller exits at every start (it is given a flag it refuses: exit 2, its last log line says so): its Pod shows CrashLoopBackOff with restarts backing off 10 s, 20 s, ...; the pools it serves stay where it left them",
		"kubernetes v1.35.4 pkg/kubelet/kuberuntime/kuberuntime_manager.go:1841-1849 (CrashLoopBackOff while the back-off runs); the refused flag is sim only", false, false},
	{RegistryUnavailableOnce, "on a lane with a real Node: the local registry answers the first request for the worker disk's manifest 503 Service Unavailable; CDI's real importer exits 1 with the error as its termination message, the real kubelet restarts it after its back-off, the second pull imports and the worker joins",
		"CDI v1.64.0 cmd/cdi-importer/importer.go:187-196 (the importer's exit) and pkg/controller/import-controller.go:958 (restartPolicy OnFailure, run by the real kubelet); the registry's answer is sim only", true, false},
	{GuestCAWrong, "on a lane with a real Node: a Talos pool's machine configuration names a CA that did not sign the tenant's apiserver (a strategic patch on its TalosConfigTemplate as it is admitted, which the real CABPT applies to every worker's bootstrap data): the real kubelet in the guest cannot verify the apiserver; its certificate manager retries in the background, and since the apiserver never answers it the kubelet never exits: no CSR, no Node, and nothing on the console, as on Talos",
		"kubernetes v1.35.6 cmd/kubelet/app/server.go:933,987-990 and pkg/kubelet/certificate/transport.go:114-124 (with rotateCertificates, which Talos sets: siderolabs/talos v1.13.6 internal/app/machined/pkg/controllers/k8s/kubelet_spec.go:303, the kubelet exits only when the server answers); the patch is sim only", false, false},
	{GuestTokenExpired, "on a lane with a real Node: a Talos pool's machine configuration names a bootstrap token whose Secret in the tenant (kube-system/bootstrap-token-<id>, written as the chart's bootstrap-token-tenant Job writes its own) expired an hour ago (the token, strategically patched onto its TalosConfigTemplate as it is admitted, and the Secret are the sim's): the tenant apiserver answers the real kubelet's CSR 401, its certificate manager retries, and five minutes after it started without a certificate, the server having answered, it exits; machined's console line carries its last log line and starts it again 5 s later, forever: no CSR, no Node",
		"k8s.io/kubernetes v1.35.4 plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go:129-131 (an expired token authenticates no one); v1.35.6 cmd/kubelet/app/server.go:987-990 and pkg/kubelet/certificate/transport.go:114-124 (the exit, \"No valid client certificate is found and the server is responsive, exiting.\"); siderolabs/talos v1.13.6 internal/app/machined/pkg/system/runner/restart/restart.go:145 (the console line); the expired Secret is sim only", false, false},
	{GuestEndpointUnreachable, "on a lane with a real Node: a Talos pool's workers cannot reach the tenant's apiserver: the /etc/hosts entry by which they resolve its Service's name (machine.network.extraHostEntries[0], JSON-patched on its TalosConfigTemplate as it is admitted, which the real CABPT applies) names an address of the real Node's pod network that no pod holds, so every connection ends in no route to host; the real kubelet's certificate manager retries, and since the server never answers it never exits: no CSR, no Node, and nothing on the console, as on Talos",
		"k8s.io/kubernetes v1.35.6 cmd/kubelet/app/server.go:987-990 and pkg/kubelet/certificate/transport.go:114-124 (the kubelet exits only when the server answers); cozystack v1.6.1 packages/apps/kubernetes/templates/talos/talos-reconcile-job.yaml:375-379 (the host entry); the address is sim only", false, false},
	{GuestKubeletCrashOnce, "on a lane with a real Node: the Talos guest's kubelet is killed (SIGKILL) once per boot, as soon as it first writes to its log: machined's console line says the task failed with exit code 137 and its last log line, machined starts it again 5 s later, and that kubelet joins (the request rides in the pool's machine configuration as machine.env COZY_E2E_SIM_KUBELET_CRASH_ONCE, strategically patched onto its TalosConfigTemplate, which only the stand-in OS reads)",
		"siderolabs/talos v1.13.6 internal/app/machined/pkg/system/runner/restart/restart.go:76-82,145 (restarted 5 s later, forever, with the line) and runner/containerd/containerd.go:244-247 (the exit code and last log); containerd/containerd v2.2.4 pkg/sys/reaper/reaper_unix.go:281-288 (a task killed by signal N exits 128+N); the kill is sim only", true, false},
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
		if err := checkComponent(Name(name), pool); err != nil {
			return nil, err
		}
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

// checkComponent refuses a controller fault without a controller it knows.
func checkComponent(n Name, target string) error {
	if !OnComponent(n) {
		return nil
	}
	for _, c := range components {
		if c == target {
			return nil
		}
	}
	return fmt.Errorf("E2E_SIM_FAULT: %s names the controller after @ (one of %s), not %q", n, strings.Join(components, ", "), target)
}

// Targets are the pools (or, for a controller fault, the controllers) fault n was selected for.
func (s *Set) Targets(n Name) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.selected[n]...)
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
