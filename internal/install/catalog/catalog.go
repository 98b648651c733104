// Package catalog is what the kind lane installs and how each piece is judged installed: for
// every component a lane pins, the platform package that brings it, the namespace it runs in,
// the CRDs that must be Established, the Deployments that must be Available, whether its
// webhooks sit in a namespace shared with other providers, and where the running version is
// reported. It is plain data (no cluster client), so the plan can print it without a cluster.
package catalog

import (
	"fmt"
	"sort"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// Version says where a running component reports its version.
type Version struct {
	// Object is read at Field (for example a CoreProvider's status.installedVersion).
	APIVersion, Kind, Namespace, Name string
	Field                             []string
	// Image, when set instead, is a Deployment whose first container's image carries the pin
	// (its tag is the version; its digest, when the lane pins one, must match).
	Image string
	// Label, when set instead, is a label of the Image-less Deployments that carries the version.
	Label string
}

// Describe is where the version is read, for plans and messages.
func (v Version) Describe() string {
	switch {
	case v.Kind != "":
		where := v.Kind + " " + v.Name
		if v.Namespace != "" {
			where = v.Kind + " " + v.Namespace + "/" + v.Name
		}
		return fmt.Sprintf("%s .%s", where, joinDots(v.Field))
	case v.Image != "":
		return "image of Deployment " + v.Image
	case v.Label != "":
		return "Deployment label " + v.Label
	}
	return "not reported"
}

// Component is one installed piece and its gate.
type Component struct {
	// Name is the lane component name.
	Name  string
	Title string
	// Package is the platform package that installs it; "" when the platform operator itself does.
	Package   string
	Namespace string
	// CRDs must be Established.
	CRDs []string
	// Deployments in Namespace must be Available.
	Deployments []string
	// Containers must all be in the first Deployment's pod template (Flux runs its
	// controllers as containers of one pod).
	Containers []string
	// SharedWebhooks: the component serves admission webhooks from a namespace other providers
	// share, so each of its webhook Services must select only its own Deployment's pods
	// (kairos-io/kairos#5815). A provider that ships no webhook has none to check.
	SharedWebhooks bool
	// NoWebhooks says why a provider in the shared namespace has no webhook to check.
	NoWebhooks string
	Version    Version
	// Checks are extra conditions of this component's gate, in words, for the plan.
	Checks []string
}

const (
	nsCAPI      = "cozy-cluster-api"
	capiOperAPI = "operator.cluster.x-k8s.io/v1alpha2"
)

// Components is every component the kind lane knows, in install and gate order.
func Components() []Component {
	return []Component{
		{Name: "cozystack-operator", Title: "Cozystack operator", Namespace: "cozy-system",
			CRDs:        []string{"packages.cozystack.io", "packagesources.cozystack.io"},
			Deployments: []string{"cozystack-operator"}, Version: Version{Image: "cozystack-operator"}},
		// The operator's --install-flux applies internal/fluxinstall/manifests/fluxcd.yaml: one
		// Deployment, flux, whose pod runs every controller as a container (l.7883-8236).
		{Name: "flux", Title: "Flux", Namespace: assumptions.FluxNamespace,
			CRDs:        []string{"helmreleases.helm.toolkit.fluxcd.io", "ocirepositories.source.toolkit.fluxcd.io", "externalartifacts.source.toolkit.fluxcd.io"},
			Deployments: []string{assumptions.FluxDeployment},
			Containers:  []string{"source-controller", "helm-controller"},
			Version:     Version{Label: "app.kubernetes.io/version"}},
		{Name: "cert-manager", Title: "cert-manager", Package: "cozystack.cert-manager", Namespace: "cozy-cert-manager",
			CRDs:        []string{"certificates.cert-manager.io", "issuers.cert-manager.io", "clusterissuers.cert-manager.io"},
			Deployments: []string{"cert-manager", "cert-manager-webhook", "cert-manager-cainjector"},
			Version:     Version{Image: "cert-manager"}},
		{Name: "metallb", Title: "MetalLB", Package: "cozystack.metallb", Namespace: "cozy-metallb",
			CRDs:        []string{"ipaddresspools.metallb.io", "l2advertisements.metallb.io"},
			Deployments: []string{"metallb-controller"}, Version: Version{Label: "app.kubernetes.io/version"},
			Checks: []string{"IPAddressPool and L2Advertisement for the kind network applied"}},
		{Name: "kubevirt", Title: "KubeVirt", Package: "cozystack.kubevirt", Namespace: "cozy-kubevirt",
			CRDs:        []string{"kubevirts.kubevirt.io", "virtualmachines.kubevirt.io", "virtualmachineinstances.kubevirt.io"},
			Deployments: []string{"virt-operator", "virt-api", "virt-controller"},
			Version:     Version{APIVersion: "kubevirt.io/v1", Kind: "KubeVirt", Namespace: "cozy-kubevirt", Name: "kubevirt", Field: []string{"status", "observedKubeVirtVersion"}},
			Checks: []string{
				"KubeVirt CR Available",
				"useEmulation matches the lane (never a silent fallback)",
				"serial console log is a per-VM choice (logSerialConsole), not removed",
			}},
		{Name: "cdi", Title: "CDI", Package: "cozystack.kubevirt-cdi", Namespace: "cozy-kubevirt-cdi",
			CRDs:        []string{"cdis.cdi.kubevirt.io", "datavolumes.cdi.kubevirt.io"},
			Deployments: []string{"cdi-operator", "cdi-deployment", "cdi-apiserver", "cdi-uploadproxy"},
			Version:     Version{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "CDI", Name: "cdi", Field: []string{"status", "observedVersion"}}},
		{Name: "kamaji", Title: "Kamaji", Package: "cozystack.kamaji", Namespace: "cozy-kamaji",
			CRDs:        []string{"tenantcontrolplanes.kamaji.clastix.io", "datastores.kamaji.clastix.io"},
			Deployments: []string{"kamaji"}, Version: Version{Image: "kamaji"}},
		{Name: "capi-operator", Title: "Cluster API operator", Package: "cozystack.capi-operator", Namespace: nsCAPI,
			CRDs:        []string{"coreproviders.operator.cluster.x-k8s.io", "bootstrapproviders.operator.cluster.x-k8s.io", "controlplaneproviders.operator.cluster.x-k8s.io", "infrastructureproviders.operator.cluster.x-k8s.io"},
			Deployments: []string{"capi-operator-cluster-api-operator"}, Version: Version{Image: "capi-operator-cluster-api-operator"}},
		provider("capi-core", "Cluster API core", "cozystack.capi-provider-core", "CoreProvider", "cluster-api",
			[]string{"clusters.cluster.x-k8s.io", "machines.cluster.x-k8s.io", "machinedeployments.cluster.x-k8s.io", "machinehealthchecks.cluster.x-k8s.io"},
			"capi-controller-manager", ""),
		provider("capi-kubeadm-bootstrap", "Cluster API kubeadm bootstrap", "cozystack.capi-provider-bootstrap-kubeadm", "BootstrapProvider", "kubeadm",
			[]string{"kubeadmconfigs.bootstrap.cluster.x-k8s.io", "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io"},
			"capi-kubeadm-bootstrap-controller-manager", ""),
		provider("capi-talos-bootstrap", "Talos bootstrap (CABPT)", "cozystack.capi-provider-bootstrap-kubeadm", "BootstrapProvider", "talos",
			[]string{"talosconfigs.bootstrap.cluster.x-k8s.io", "talosconfigtemplates.bootstrap.cluster.x-k8s.io"},
			"cabpt-controller-manager", ""),
		provider("capi-kairos-bootstrap", "Kairos bootstrap", "cozystack.capi-provider-bootstrap-kubeadm", "BootstrapProvider", "kairos",
			[]string{"kairosconfigs.bootstrap.cluster.x-k8s.io", "kairosconfigtemplates.bootstrap.cluster.x-k8s.io"},
			"capi-kairos-bootstrap-controller-manager", ""),
		provider("capi-kamaji", "Kamaji control plane provider", "cozystack.capi-provider-cp-kamaji", "ControlPlaneProvider", "kamaji",
			[]string{"kamajicontrolplanes.controlplane.cluster.x-k8s.io"},
			"capi-kamaji-controller-manager",
			"its components carry no Service and no webhook configuration (packages/system/capi-providers-cpprovider/files/control-plane-components.yaml at main and v1.6.2)"),
		provider("capk", "KubeVirt infrastructure provider (CAPK)", "cozystack.capi-provider-infra-kubevirt", "InfrastructureProvider", "kubevirt",
			[]string{"kubevirtclusters.infrastructure.cluster.x-k8s.io", "kubevirtmachines.infrastructure.cluster.x-k8s.io", "kubevirtmachinetemplates.infrastructure.cluster.x-k8s.io"},
			"capk-controller-manager", ""),
	}
}

// provider is a Cluster API provider in the namespace they all share; noWebhooks, when not
// empty, says why it has no webhook to check.
func provider(name, title, pkg, kind, object string, crds []string, deployment, noWebhooks string) Component {
	return Component{
		Name: name, Title: title, Package: pkg, Namespace: nsCAPI, CRDs: crds,
		Deployments: []string{deployment}, SharedWebhooks: noWebhooks == "", NoWebhooks: noWebhooks,
		Version: Version{APIVersion: capiOperAPI, Kind: kind, Namespace: nsCAPI, Name: object, Field: []string{"status", "installedVersion"}},
	}
}

// Find returns the catalog entry of a lane component name.
func Find(name string) (Component, bool) {
	for _, c := range Components() {
		if c.Name == name {
			return c, true
		}
	}
	return Component{}, false
}

// Pinned is a catalog component with the lane's pin for it.
type Pinned struct {
	Component
	Pin lane.Component
}

// ForLane pairs every catalog component with the lane's pin, in catalog order. A catalog
// component the lane does not pin, or a lane component that is neither in the catalog nor the
// node image, is an error naming the lane file and what to add or remove.
func ForLane(l *lane.Lane) ([]Pinned, error) {
	pins := map[string]lane.Component{}
	for _, c := range l.Components {
		pins[c.Name] = c
	}
	var out []Pinned
	var missing []string
	for _, c := range Components() {
		pin, ok := pins[c.Name]
		if !ok {
			missing = append(missing, c.Name)
			continue
		}
		delete(pins, c.Name)
		out = append(out, Pinned{Component: c, Pin: pin})
	}
	delete(pins, lane.KindNodeComponent)
	var unknown []string
	for name := range pins {
		unknown = append(unknown, name)
	}
	sort.Strings(unknown)
	switch {
	case len(missing) > 0:
		return nil, fmt.Errorf("%s: components: no pin for %v; a kind lane pins every component it installs (name, version, and image with digest or \"unknown\" and a note)", l.File, missing)
	case len(unknown) > 0:
		return nil, fmt.Errorf("%s: components: %v are not installed by the kind lane (known: %s)", l.File, unknown, names())
	}
	return out, nil
}

func names() string {
	s := ""
	for i, c := range Components() {
		if i > 0 {
			s += ", "
		}
		s += c.Name
	}
	return s + ", " + lane.KindNodeComponent
}

func joinDots(p []string) string {
	s := ""
	for i, f := range p {
		if i > 0 {
			s += "."
		}
		s += f
	}
	return s
}
