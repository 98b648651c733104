package install

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// PlatformNamespace is where the platform operator and its Package objects live.
const PlatformNamespace = "cozy-system"

// LocalPathProvisioner is the provisioner of the node-disk volumes kind ships.
const LocalPathProvisioner = "rancher.io/local-path"

// StorageClasses are the classes the tenant chart names, on the node's disk: local (the
// default, as on the platform's own clusters) and replicated (one replica on kind: there is no
// DRBD). Both bind when a consumer is scheduled, as the platform's do.
func StorageClasses() []Object {
	sc := func(name string, def bool) Object {
		u := obj("storage.k8s.io/v1", "StorageClass", "", name)
		u.SetAnnotations(map[string]string{"storageclass.kubernetes.io/is-default-class": fmt.Sprint(def)})
		u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": FieldOwner})
		u.Object["provisioner"] = LocalPathProvisioner
		u.Object["volumeBindingMode"] = "WaitForFirstConsumer"
		u.Object["reclaimPolicy"] = "Delete"
		return Object{Source: "internal/install: storage classes", Obj: u}
	}
	// kind's own class gives up being the default, so exactly one default remains.
	standard := obj("storage.k8s.io/v1", "StorageClass", "", "standard")
	standard.SetAnnotations(map[string]string{"storageclass.kubernetes.io/is-default-class": "false"})
	standard.Object["provisioner"] = LocalPathProvisioner
	return []Object{sc("local", true), sc("replicated", false), {Source: "internal/install: storage classes", Obj: standard}}
}

// ClusterDomain is the lane's cluster domain: kind.networking.dnsDomain, or the platform's
// default (cozy.local). The kind config and the platform Package both take it from here, so
// the cluster's DNS and the names the platform writes (the etcd-operator's
// --cluster-domain, the Talos workers' search domains) agree.
func ClusterDomain(l *lane.Lane) string {
	if l.Kind != nil && l.Kind.Networking != nil && l.Kind.Networking.DNSDomain != "" {
		return l.Kind.Networking.DNSDomain
	}
	return assumptions.ClusterDomain
}

// PlatformInput is what the platform Package needs besides the lane.
type PlatformInput struct {
	// ControlPlaneIP is the kind control-plane node's address: the apiserver endpoint, and
	// kube-ovn's MASTER_NODES (the node also carries the control-plane label with the value
	// "true" the generic variant selects; the kind substrate sets it after create).
	ControlPlaneIP string
}

// PlatformPackage is the Package that makes the operator install the platform with the lane's
// variant and package set.
func PlatformPackage(l *lane.Lane, in PlatformInput) (Object, error) {
	if l.Platform == nil {
		return Object{}, fmt.Errorf("%s: platform: the lane says nothing of the platform", l.File)
	}
	if _, err := netip.ParseAddr(in.ControlPlaneIP); err != nil {
		return Object{}, fmt.Errorf("platform package: control-plane address %q: %w", in.ControlPlaneIP, err)
	}
	p := l.Platform
	variant := p.Variant
	if variant == "" {
		variant = "isp-full-generic"
	}
	bundles := map[string]any{
		"system": map[string]any{"enabled": true, "variant": variant},
		"iaas":   map[string]any{"enabled": true},
		"paas":   map[string]any{"enabled": false},
		"naas":   map[string]any{"enabled": false},
	}
	if len(p.Packages) > 0 {
		bundles["enabledPackages"] = toAny(p.Packages)
	}
	if len(p.DisabledPackages) > 0 {
		bundles["disabledPackages"] = toAny(p.DisabledNames())
	}
	networking := map[string]any{
		"kubeovn":       map[string]any{"MASTER_NODES": in.ControlPlaneIP},
		"clusterDomain": ClusterDomain(l),
	}
	if k := l.Kind; k != nil {
		// kube-ovn's ranges are the platform's own (the lane's platform.networking, else the
		// platform's defaults), disjoint from the kind cluster's pod range (lanes-check refuses
		// an overlap); the Service range is the cluster's.
		pod := l.Platform.PodCIDR()
		networking["podCIDR"], networking["joinCIDR"] = pod, l.Platform.JoinCIDR()
		if pfx, err := netip.ParsePrefix(pod); err == nil {
			networking["podGateway"] = pfx.Addr().Next().String()
		}
		if k.Networking != nil && k.Networking.ServiceSubnet != "" {
			networking["serviceCIDR"] = k.Networking.ServiceSubnet
		}
	}
	u := obj("cozystack.io/v1alpha1", "Package", "", "cozystack.cozystack-platform")
	u.Object["spec"] = map[string]any{
		"variant": variant,
		"components": map[string]any{"platform": map[string]any{"values": map[string]any{
			"bundles":    bundles,
			"networking": networking,
			"publishing": map[string]any{
				"host":              "example.org",
				"apiServerEndpoint": "https://" + in.ControlPlaneIP + ":6443",
			},
		}}},
	}
	return Object{Source: "internal/install: platform package", Obj: u}, nil
}

// MetalLBPool is the address pool and L2 advertisement that give LoadBalancer Services (the
// tenant apiservers among them) an address on the kind network the runner can reach.
func MetalLBPool(namespace, addressRange string) ([]Object, error) {
	if _, _, err := lane.ParseRange(addressRange); err != nil {
		return nil, fmt.Errorf("MetalLB pool: %w", err)
	}
	pool := obj("metallb.io/v1beta1", "IPAddressPool", namespace, "cozy-e2e")
	pool.Object["spec"] = map[string]any{"addresses": []any{addressRange}, "autoAssign": true}
	adv := obj("metallb.io/v1beta1", "L2Advertisement", namespace, "cozy-e2e")
	adv.Object["spec"] = map[string]any{"ipAddressPools": []any{"cozy-e2e"}}
	src := "internal/install: MetalLB pool"
	return []Object{{Source: src, Obj: pool}, {Source: src, Obj: adv}}, nil
}

// RangeInSubnet is the default LoadBalancer range in a kind network: 51 addresses ending five
// below the subnet's broadcast address, clear of the nodes docker numbers from the bottom.
func RangeInSubnet(subnet string) (string, error) {
	pfx, err := netip.ParsePrefix(subnet)
	if err != nil || !pfx.Addr().Is4() {
		return "", fmt.Errorf("kind network subnet %q is not an IPv4 CIDR", subnet)
	}
	if pfx.Bits() > 24 {
		return "", fmt.Errorf("kind network subnet %s is too small for a LoadBalancer range (want /24 or larger)", subnet)
	}
	base := pfx.Masked().Addr().As4()
	size := uint32(1) << (32 - pfx.Bits())
	start := be(base)
	last := start + size - 1 - 5
	first := last - 50
	return fmt.Sprintf("%s-%s", ip4(first), ip4(last)), nil
}

func be(a [4]byte) uint32 {
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

func ip4(v uint32) string {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

func obj(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
