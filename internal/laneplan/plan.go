// Package laneplan prints a lane's whole ordered plan without touching a cluster (lanes plan,
// make e2e-plan): phases with their ceilings and latest ends, pins, the machine, classes and
// pools, suites, policy, and the artifacts a run leaves.
package laneplan

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// Section is a titled block of plan lines that another package contributes (the kind lane's
// install steps and gates come from internal/install/catalog).
type Section struct {
	Title string
	Lines []string
}

// Write prints the whole ordered plan of a lane without touching a cluster: phases with their
// ceilings and latest ends, pins, classes and pools, suites, policy, and the artifacts a run
// leaves; extra sections are printed after the pins.
func Write(w io.Writer, l *lane.Lane, extra ...Section) {
	writeHeader(w, l)
	writeClusters(w, l)

	writePhases(w, l)
	fmt.Fprintf(w, "  then diagnostics (on failure) within %s, artifacts within %s\n\n", l.Budget.DiagnosticsReserve, l.Budget.ArtifactReserve)

	writeComponents(w, l)
	writeMachine(w, l)
	writeSections(w, extra)
	writeWorkers(w, l)
	writeSuites(w, l)
	writeArtifacts(w, l)
}

// writeHeader prints the lane, its conformance clusters' versions and the job cap's arithmetic.
func writeHeader(w io.Writer, l *lane.Lane) {
	a := l.Budget.Arithmetic()
	var versions []string
	for _, c := range l.ConformanceClusters() {
		if !slices.Contains(versions, c.Kubernetes.Version) {
			versions = append(versions, c.Kubernetes.Version)
		}
	}
	fmt.Fprintf(w, "lane %s (%s substrate), one install, %d conformance cluster(s) at tenant Kubernetes %s; the lane's own %s (kubelet %s)\n",
		l.Name, l.Substrate, len(l.Clusters()), strings.Join(versions, ", "), l.Kubernetes.Version, l.Kubernetes.Patch)
	fmt.Fprintf(w, "job cap %s: phases %s + diagnostics reserve %s + artifact reserve %s + margin %s = %s (headroom %s)\n",
		a.Cap, a.Phases, a.Diagnostics, a.Artifacts, a.Margin, a.Total, a.Headroom)
	if a.Longest != "" {
		fmt.Fprintf(w, "  the clusters' own timelines run side by side: phases counts the longest, cluster %s's %s, and not the %s of the others beside it\n",
			a.Longest, a.Timelines, a.Beside)
	}
	if l.Budget.Note != "" {
		fmt.Fprintf(w, "  where the numbers come from: %s\n", l.Budget.Note)
	}
	fmt.Fprintln(w)
}

// writeComponents prints the pins: each component's version, image and digest, and where it
// comes from; a digest not pinned yet with its note.
func writeComponents(w io.Writer, l *lane.Lane) {
	if len(l.Components) == 0 {
		return
	}
	fmt.Fprintln(w, "components")
	for _, c := range l.Components {
		pin := c.Version
		if c.Image != "" {
			pin += "  " + c.Image + "@" + c.Digest
		} else if c.Digest != "" {
			pin += "  " + c.Digest
		}
		if c.Source != "" {
			pin += "  from " + c.Source
		}
		fmt.Fprintf(w, "  %-28s %s\n", c.Name, pin)
		if c.Digest == lane.DigestUnknown {
			fmt.Fprintf(w, "  %-28s   digest not pinned yet: %s\n", "", c.Note)
		}
	}
	fmt.Fprintln(w)
}

// writeSections prints the sections other packages contribute, each under its title.
func writeSections(w io.Writer, extra []Section) {
	for _, sec := range extra {
		fmt.Fprintln(w, sec.Title)
		for _, line := range sec.Lines {
			fmt.Fprintln(w, "  "+line)
		}
		fmt.Fprintln(w)
	}
}

// writeWorkers prints the operator classes, the pools in their conformance clusters and the
// workload.
func writeWorkers(w io.Writer, l *lane.Lane) {
	for _, c := range l.Classes {
		fmt.Fprintf(w, "class %s: os %s", c.Name, c.OS)
		if c.Image != "" {
			fmt.Fprintf(w, ", image %s, Kubernetes %s", c.Image, c.KubernetesVersion)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "pools (in parallel; each in its conformance cluster, a Kubernetes app of the tenant)")
	for _, p := range l.Pools {
		fmt.Fprintf(w, "  %-10s cluster %-10s class %-12s replicas %d\n", p.Name, p.ClusterName(), p.Class, p.Replicas)
	}
	fmt.Fprintf(w, "workload %s\n\n", l.Workload.Ref())
}

// writeSuites prints the suites with their label filters and the policy: the soft failure
// classes and, off the sim, the HelmReleases remediated.
func writeSuites(w io.Writer, l *lane.Lane) {
	fmt.Fprintln(w, "suites")
	for _, s := range l.Suites {
		filter := s.LabelFilter
		if filter == "" {
			filter = "(all specs)"
		}
		fmt.Fprintf(w, "  %-12s label filter %s\n", s.Name, filter)
	}
	soft := "none"
	if len(l.Policy.Soft) > 0 {
		soft = strings.Join(l.Policy.Soft, ", ")
	}
	fmt.Fprintf(w, "soft failure classes: %s\n", soft)
	if l.Substrate != lane.SubstrateSim {
		r := l.Policy.Remediation
		fmt.Fprintf(w, "remediated HelmReleases (a failed or uninstalled release in status.history): at install %s, on the tenant's Kubernetes release %s\n",
			r.InstallPolicy(), r.TenantPolicy())
	}
	fmt.Fprintln(w)
}

// writeArtifacts prints the files a run leaves, and a kind lane's substrate files.
func writeArtifacts(w io.Writer, l *lane.Lane) {
	fmt.Fprintln(w, "artifacts ($E2E_ARTIFACTS, default _artifacts/<lane>-<UTC time>/)")
	for _, f := range []string{"junit.xml", "verdict.json", "timings.json", "summary.md", "manifest.json", "repro.txt"} {
		fmt.Fprintf(w, "  %s\n", f)
	}
	if l.Substrate == lane.SubstrateKind {
		for _, f := range []string{
			"substrate/preflight.txt      what the preflight found (docker, KVM, CPU, memory, disk, inotify, cgroup)",
			"substrate/kind-config.yaml   the generated kind node config",
			"substrate/platform.txt       the platform source used and the sha256 of every manifest applied",
			"substrate/platform.json      the same for make repro: the source pinned at the verified digest, or the checkout and its commit",
			"substrate/platform-build.log a checkout source's make targets, as they ran",
			"substrate/gates.txt          each component gate as it passed or failed",
		} {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
}

// writeMachine prints what the lane needs of the runner, the kind cluster and the platform.
func writeMachine(w io.Writer, l *lane.Lane) {
	r := l.Runner
	if r.CPUs > 0 || r.MemoryGiB > 0 || r.DiskGiB > 0 {
		fmt.Fprintf(w, "runner %v: at least %d CPUs, %d GiB memory, %d GiB free disk", r.RunsOn, r.CPUs, r.MemoryGiB, r.DiskGiB)
		if l.Substrate == lane.SubstrateKind {
			fmt.Fprint(w, ", docker, hardware KVM (/dev/kvm)")
			if l.Kind != nil && l.Kind.Emulation {
				fmt.Fprint(w, " or software emulation (this lane allows it)")
			}
		}
		fmt.Fprintln(w)
		if r.InotifyWatches > 0 || r.InotifyInstances > 0 {
			fmt.Fprintf(w, "  inotify: max_user_watches >= %d, max_user_instances >= %d\n", r.InotifyWatches, r.InotifyInstances)
		}
		if r.Nightly {
			fmt.Fprintln(w, "  e2e workflow: the nightly schedule and dispatch only, not pull requests or pushes (runner.nightly)")
		}
		if l.Substrate == lane.SubstrateKind {
			fmt.Fprintln(w, "  e2e-lane workflow (reusable): a pull request of the calling repository, or a fork's from a workflow_run caller (platform-run-id, platform-head-sha: the artifact downloaded from that run with the caller's token, the harness pinned by commit, no registry login, nothing of the fork built on the runner)")
		}
		fmt.Fprintln(w)
	}
	if k := l.Kind; k != nil {
		fmt.Fprintf(w, "kind cluster %s: 1 control-plane node, %d workers", l.Name, k.Workers)
		if n := k.Networking; n != nil {
			fmt.Fprintf(w, ", pods %s (kube-ovn's POD_CIDR %s, JOIN_CIDR %s: disjoint), services %s, default CNI disabled %t, kube-proxy %q",
				n.PodSubnet, l.Platform.PodCIDR(), l.Platform.JoinCIDR(), n.ServiceSubnet, n.DisableDefaultCNI, n.KubeProxyMode)
		}
		fmt.Fprintln(w)
		domain := assumptions.ClusterDomain
		if k.Networking != nil && k.Networking.DNSDomain != "" {
			domain = k.Networking.DNSDomain
		}
		writeNodeImage(w, l)
		fmt.Fprintf(w, "  created without waiting for Ready (no node is Ready before the platform's CNI); the gates judge Ready\n")
		fmt.Fprintf(w, "  cluster domain %s: a kubeadm ClusterConfiguration networking.dnsDomain patch (kind has no field for it), and the platform's networking.clusterDomain\n", domain)
		fmt.Fprintf(w, "  kubelet maxPods %d: a kubeadm KubeletConfiguration patch (kubelet default %d; Cozystack's e2e and Talos presets give %d, its generic guide %d to a k3s node; this one node carries what Cozystack's e2e spreads over three)\n",
			assumptions.KubeletMaxPods, assumptions.KubeletDefaultMaxPods, assumptions.KubeletMaxPods, assumptions.GenericGuideMaxPods)
		fmt.Fprintf(w, "  containerd: containerdConfigPatches [%s] %s = true (the CRI plugin of the version 2 config kind's node images ship, which containerd 2.x migrates), so KubeVirt's non-root launcher opens a /dev/kvm that is not world-writable; the preflight says the host's mode\n",
			assumptions.CRIPluginV2, assumptions.DeviceOwnershipKey)
		fmt.Fprintf(w, "  control-plane node labelled %s=%s after create (kube-ovn's MASTER_NODES_LABEL on %s; kubeadm sets it empty), %s removed (MetalLB's speaker announces nothing from a node that carries it)\n",
			assumptions.ControlPlaneLabel, assumptions.ControlPlaneLabelValue, assumptions.PlatformVariant, assumptions.ExcludeFromExternalLBLabel)
		fmt.Fprintf(w, "  registry login (E2E_PLATFORM_REGISTRY with _USERNAME and _PASSWORD, none by default): every node's kubelet reads it at %s (a read-only mount from the run's work folder, kind's way), the operator through a dockerconfigjson Secret in %s its %s names; the run scans every artifact for it. It does not reach CDI's importer, which pulls a Kairos pool's disk with the DataVolume's own secretRef (the chart sets none), nor tenant workers (the platform-wide registries value no longer reaches them): the preflight refuses a pool whose Kairos disk is on the registry the run logs in to\n",
			assumptions.KubeletDockerConfig, assumptions.PlatformSourceSecretNamespace, assumptions.PlatformSourceSecretFlag)
		for _, host := range slices.Sorted(maps.Keys(k.RegistryMirrors)) {
			fmt.Fprintf(w, "  mirror %s -> %s\n", host, strings.Join(k.RegistryMirrors[host], ", "))
		}
		for _, m := range k.PortMappings {
			fmt.Fprintf(w, "  port %s:%d -> node %d/%s\n", m.ListenAddress, m.HostPort, m.ContainerPort, m.Protocol)
		}
		lb := k.LoadBalancerRange
		if lb == "" {
			lb = "top of the kind network's IPv4 subnet (found at run time)"
		}
		fmt.Fprintf(w, "  LoadBalancer addresses (MetalLB): %s\n", lb)
		fmt.Fprintln(w)
	}
	if p := l.Platform; p != nil {
		fmt.Fprintf(w, "platform %s (E2E_PLATFORM_SOURCE overrides), variant %s\n", p.Source, p.Variant)
		if p.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", p.Note)
		}
		if len(p.Packages) > 0 {
			fmt.Fprintf(w, "  enabled packages: %s\n", strings.Join(p.Packages, ", "))
		}
		if len(p.DisabledPackages) > 0 {
			fmt.Fprintf(w, "  disabled packages (checked against the dependency graphs at cozystack %s and %s: they orphan no Package)\n",
				assumptions.CozystackMain[:12], "v1.6.2")
			for _, d := range p.DisabledPackages {
				fmt.Fprintf(w, "    %-38s %s; %s\n", d.Name, d.Reason, assumptions.WhySafe(d.Name, p.DisabledNames()))
			}
		}
		fmt.Fprintln(w)
	}
}

// writeNodeImage prints the kind node image every node is created from, where its pin comes
// from and why, and how a run overrides it.
func writeNodeImage(w io.Writer, l *lane.Lane) {
	for _, c := range l.Components {
		if c.Name != lane.KindNodeComponent {
			continue
		}
		if c.Digest == lane.DigestUnknown || c.Digest == "" {
			fmt.Fprintf(w, "  node image %s:%s, digest not pinned: the preflight refuses it unless E2E_KIND_NODE_IMAGE pins one\n", c.Image, c.Version)
		} else {
			fmt.Fprintf(w, "  node image %s:%s@%s, from %s\n", c.Image, c.Version, c.Digest, c.Source)
			if c.Note != "" {
				fmt.Fprintf(w, "    why: %s\n", c.Note)
			}
		}
		fmt.Fprintf(w, "    E2E_KIND_NODE_IMAGE=<image>:<tag>@sha256:<hex> overrides it for a run (%s); run.json and repro.json record the image used, a repro refuses another\n",
			lane.ManagementRange)
	}
}
