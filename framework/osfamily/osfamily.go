// Package osfamily is the registry of the worker operating systems a NodeGroupClass can name
// (its spec.os): for each, the bootstrap kinds a pool on it renders, how its guests join, what
// they print on the serial console, and the identity their Nodes take. Every fact is read from
// upstream and cited here and in docs/signals.md; adding an OS is adding one Family below.
package osfamily

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of the built-in families, the values of a NodeGroupClass's spec.os.
const (
	Talos  = "talos"
	Kairos = "kairos"
)

// Family is one worker OS.
type Family struct {
	// Name is the NodeGroupClass spec.os value.
	Name string
	// BootstrapTemplate is the kind of the pool's template (R-<pool>) and BootstrapConfig the
	// kind Cluster API clones from it per Machine.
	BootstrapTemplate, BootstrapConfig schema.GroupVersionKind
	// Kubeadm: workers join with kubeadm join and take their kubelet configuration, clusterDNS
	// included, from the tenant's kube-system/kubelet-config.
	Kubeadm bool
	// EFI: the pool's VMIs boot with EFI firmware.
	EFI bool
	// NodeNamedLikeVMI: the worker's Node takes the VMI's name, and CAPK sets the providerID on
	// the Node of that name. Otherwise the Node carries a name of its own (HostnamePrefix) and
	// the kubelet sets the providerID itself; it is found by that providerID.
	NodeNamedLikeVMI bool
	// HostnamePrefix is how a Node not named like its VMI is named by default.
	HostnamePrefix string
	// ConsoleJoined and ConsoleRefused match the serial console lines in which the guest says
	// it joined or that a join attempt failed; nil when the OS prints neither there, and the
	// join is judged from the tenant's objects alone.
	ConsoleJoined, ConsoleRefused *regexp.Regexp
	// ConsoleRetry says why a failed attempt is no final state: how the OS tries again.
	ConsoleRetry string
}

var families = []Family{
	{
		Name: Talos,
		// siderolabs/cluster-api-bootstrap-provider-talos v0.6.12 api/v1alpha3.
		BootstrapTemplate: schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1alpha3", Kind: "TalosConfigTemplate"},
		BootstrapConfig:   schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1alpha3", Kind: "TalosConfig"},
		// The Talos guest's hostname is KubeVirt's config-drive hostname, the VMI's name
		// (kubevirt/kubevirt v1.8.4 pkg/cloud-init/cloud-init.go:131,416), and CAPK patches the
		// providerID onto the Node of the KubevirtMachine's name
		// (cluster-api-provider-kubevirt v0.1.10 controllers/kubevirtmachine_controller.go:389-434).
		NodeNamedLikeVMI: true,
		// Talos mirrors kernel and machined ([talos]) output to ttyS0; the kubelet's only with
		// machine debug on, which Cozystack does not set (siderolabs/talos v1.13.6
		// internal/app/machined/pkg/system/services/kubelet.go:191). No console line says a
		// Talos worker joined. Talos runs the kubelet with rotateCertificates
		// (internal/app/machined/pkg/controllers/k8s/kubelet_spec.go:303), so its TLS bootstrap
		// is the certificate manager's, retried in the background, and the kubelet exits only
		// when it has had no client certificate for five minutes while the apiserver answers it
		// (k8s.io/kubernetes v1.35.6 cmd/kubelet/app/server.go:933,987-990,
		// pkg/kubelet/certificate/transport.go:114-124): a token the control plane refuses does
		// that; a CA that does not verify the apiserver, or an endpoint it cannot reach, never
		// does, and the console stays silent. When it exits, machined says so on the console with
		// the task's last output, and starts it again 5 s later, forever
		// (internal/app/machined/pkg/system/service_runner.go:138, the line;
		// runner/restart/restart.go:80,145, the interval and the words;
		// runner/containerd/containerd.go:244-247, the last log; services/kubelet.go:216).
		ConsoleRefused: regexp.MustCompile(`service\[kubelet\]\(Waiting\): Error running .*, going to restart forever`),
		ConsoleRetry:   "Talos's machined starts the kubelet again 5 s later, forever",
	},
	{
		Name: Kairos,
		// kairos-io/cluster-api-provider-kairos api/bootstrap/v1beta2.
		BootstrapTemplate: schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KairosConfigTemplate"},
		BootstrapConfig:   schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KairosConfig"},
		// Kairos workers join with kubeadm join (cozystack/cozystack#4911, the seed: "joins the
		// tenant control plane with kubeadm join through the Kairos Cluster API bootstrap
		// provider"; the provider release it pins, v0.2.1, is not published where it can be read).
		Kubeadm: true,
		// The platform's Kairos disk boots with EFI (#4911; the KubevirtMachineTemplate carries
		// firmware.bootloader.efi).
		EFI: true,
		// The provider names the host <hostnamePrefix><machine-id> with the default prefix metal-
		// and passes --provider-id to the kubelet once the KubevirtMachine has one
		// (kairos-io/cluster-api-provider-kairos main c300236 api/bootstrap/v1beta2/
		// kairosconfig_types.go:297-303, internal/controllers/bootstrap/
		// kairosconfig_controller.go:387-431); Cluster API links the Node by providerID.
		HostnamePrefix: "metal-",
		// kubeadm's own words (k8s.io/kubernetes v1.35.4 cmd/kubeadm/app/cmd/join.go:58,
		// cmd/kubeadm/app/cmd/phases/workflow/runner.go:262, cmd/kubeadm/app/discovery/discovery.go:46,
		// cmd/kubeadm/app/cmd/join.go:720); that they reach a Kairos guest's serial console is
		// the assumption of a kubeadm join run by the guest's agent on ttyS0.
		ConsoleJoined:  regexp.MustCompile(`This node has joined the cluster`),
		ConsoleRefused: regexp.MustCompile(`error execution phase|couldn't validate the identity of the API Server|unable to fetch the kubeadm-config ConfigMap`),
		// kairos-io/provider-kubeadm v4.10.0 scripts/kube-join.sh:74-82.
		ConsoleRetry: "Kairos's kubeadm provider resets and runs kubeadm join again 10 s later",
	},
}

// Lookup is the family named name, or an error naming the known ones.
func Lookup(name string) (Family, error) {
	for _, f := range families {
		if f.Name == name {
			return f, nil
		}
	}
	return Family{}, fmt.Errorf("%q is not a worker OS this harness knows (known: %s)", name, strings.Join(Names(), ", "))
}

// Names lists the known families, sorted.
func Names() []string {
	out := make([]string, 0, len(families))
	for _, f := range families {
		out = append(out, f.Name)
	}
	sort.Strings(out)
	return out
}

// Known reports whether name is a known family.
func Known(name string) bool {
	_, err := Lookup(name)
	return err == nil
}

// All lists every family.
func All() []Family { return append([]Family(nil), families...) }

// IsBuiltInClass reports whether a NodeGroupClass named name is one the platform ships: the
// built-in classes carry their family's name (#4911: talos, the default, and kairos).
func IsBuiltInClass(name string) bool { return Known(name) }
