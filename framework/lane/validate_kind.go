package lane

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

var (
	dnsSubdomain   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	kubeProxyModes = map[string]bool{"": true, "iptables": true, "nftables": true, "none": true}
	portProtocols  = map[string]bool{"": true, "TCP": true, "UDP": true, "SCTP": true}
)

// validateKind checks what only a kind lane has: the pinned node image, the platform's package
// lists, the node networking, port mappings, registry mirrors and the LoadBalancer range.
func (l *Lane) validateKind(v *validator) {
	l.validateNodeImage(v)
	if p := l.Platform; p != nil {
		validatePlatform(v, p)
	}
	k := l.Kind
	if k == nil {
		return
	}
	if k.Workers < 0 {
		v.fail("kind.workers", "%d is negative", k.Workers)
	}
	if n := k.Networking; n != nil {
		if !kubeProxyModes[n.KubeProxyMode] {
			v.fail("kind.networking.kubeProxyMode", "%q is not iptables, nftables or none (ipvs needs a kernel module kind runners lack)", n.KubeProxyMode)
		}
		if d := n.DNSDomain; d != "" && !dnsSubdomain.MatchString(d) {
			v.fail("kind.networking.dnsDomain", "%q is not a DNS domain (cozy.local)", d)
		}
		l.validateRanges(v, n)
	}
	validatePortMappings(v, k.PortMappings)
	validateRegistryMirrors(v, k.RegistryMirrors)
	if r := k.LoadBalancerRange; r != "" {
		if _, _, err := ParseRange(r); err != nil {
			v.fail("kind.loadBalancerRange", "%v", err)
		}
	}
}

// validateNodeImage checks the kind node image the lane pins as a component: named, with an
// image, and a pinned one a kind release in the range the lane's Cluster API runs on.
func (l *Lane) validateNodeImage(v *validator) {
	var node *Component
	for i := range l.Components {
		if l.Components[i].Name == KindNodeComponent {
			node = &l.Components[i]
		}
	}
	if node == nil {
		v.fail("components", "a kind lane pins its node image as component %q (image kindest/node, digest)", KindNodeComponent)
	} else if node.Image == "" {
		v.fail("components", "component %q names no image", KindNodeComponent)
	} else if node.Digest != DigestUnknown {
		// A pinned node image is a release kind tags with its Kubernetes version, in the range
		// the lane's Cluster API runs on.
		if err := CheckKindNodeVersion(node.Version); err != nil {
			v.fail("components", "component %q: %v", KindNodeComponent, err)
		}
	}
}

// validatePlatform checks the platform's package lists (no package both enabled and disabled,
// no disabled set that orphans a Package) and its source.
func validatePlatform(v *validator, p *Platform) {
	seen := map[string]string{}
	for i, name := range p.Packages {
		seen[name] = fmt.Sprintf("platform.packages[%d]", i)
	}
	for i, d := range p.DisabledPackages {
		if at, ok := seen[d.Name]; ok {
			v.fail(fmt.Sprintf("platform.disabledPackages[%d]", i), "%q is also enabled at %s", d.Name, at)
		}
		seen[d.Name] = fmt.Sprintf("platform.disabledPackages[%d]", i)
	}
	// The operator creates no HelmRelease for a Package whose dependency is missing: a set
	// that orphans a Package is refused here, before anything is installed.
	problems, err := assumptions.CheckDisabled(p.DisabledNames())
	if err != nil {
		v.fail("platform.disabledPackages", "%v", err)
	}
	for _, problem := range problems {
		v.fail("platform.disabledPackages", "%s", problem)
	}
	// release:unknown is the lane saying no release is pinned yet; the preflight refuses it
	// with the lane's note.
	if p.Source != "release:"+DigestUnknown {
		if _, err := ParseSource(p.Source); err != nil {
			v.fail("platform.source", "%v", err)
		}
	}
}

// validatePortMappings checks kind.portMappings: ports in range, a known protocol, an IP
// address to listen on.
func validatePortMappings(v *validator, mappings []KindPortMapping) {
	for i, m := range mappings {
		path := fmt.Sprintf("kind.portMappings[%d]", i)
		if m.ContainerPort < 1 || m.ContainerPort > 65535 {
			v.fail(path+".containerPort", "%d is not a port", m.ContainerPort)
		}
		if m.HostPort < 0 || m.HostPort > 65535 {
			v.fail(path+".hostPort", "%d is not a port", m.HostPort)
		}
		if !portProtocols[m.Protocol] {
			v.fail(path+".protocol", "%q is not TCP, UDP or SCTP", m.Protocol)
		}
		if m.ListenAddress != "" {
			if _, err := netip.ParseAddr(m.ListenAddress); err != nil {
				v.fail(path+".listenAddress", "%q is not an IP address", m.ListenAddress)
			}
		}
	}
}

// validateRegistryMirrors checks kind.registryMirrors: each host names at least one http(s)
// endpoint.
func validateRegistryMirrors(v *validator, mirrors map[string][]string) {
	for _, host := range slices.Sorted(maps.Keys(mirrors)) {
		path := "kind.registryMirrors." + host
		if len(mirrors[host]) == 0 {
			v.fail(path, "names no mirror endpoint")
		}
		for i, ep := range mirrors[host] {
			u, err := url.Parse(ep)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.fail(fmt.Sprintf("%s[%d]", path, i), "%q is not an http(s):// endpoint", ep)
			}
		}
	}
}

// cidrRange is one address range of the management cluster, where the lane sets it.
type cidrRange struct {
	path, cidr, what string
	pfx              netip.Prefix
}

// validateRanges refuses a kind cluster range that overlaps one of the platform's: Cilium takes
// each node's router and ingress addresses from the Node's podCIDR (cut from
// kind.networking.podSubnet) while kube-ovn hands pods the lowest free addresses of its own
// POD_CIDR, so overlapping ranges give a pod an address Cilium holds. Cozystack's e2e keeps them
// disjoint and guards it (assumptions.PlatformPodCIDR).
func (l *Lane) validateRanges(v *validator, n *KindNetworking) {
	var kind, platform []cidrRange
	add := func(to *[]cidrRange, path, cidr, what string) {
		if cidr == "" {
			return
		}
		pfx, err := netip.ParsePrefix(cidr)
		if err != nil {
			v.fail(path, "%q is not a CIDR", cidr)
			return
		}
		*to = append(*to, cidrRange{path: path, cidr: cidr, what: what, pfx: pfx})
	}
	add(&kind, "kind.networking.podSubnet", n.PodSubnet, "the kind cluster's pod range, each Node's podCIDR, where Cilium takes its router and ingress addresses")
	add(&kind, "kind.networking.serviceSubnet", n.ServiceSubnet, "the kind cluster's Service range")
	var ln PlatformNetworking
	if p := l.Platform; p != nil && p.Networking != nil {
		ln = *p.Networking
	}
	where := func(field, set string) string {
		if set != "" {
			return "platform.networking." + field
		}
		return "platform.networking." + field + " (unset: the platform's default)"
	}
	podPath, podCIDR := where("podCIDR", ln.PodCIDR), l.Platform.PodCIDR()
	joinPath, joinCIDR := where("joinCIDR", ln.JoinCIDR), l.Platform.JoinCIDR()
	add(&platform, podPath, podCIDR, "kube-ovn's POD_CIDR, where it hands pods their addresses")
	add(&platform, joinPath, joinCIDR, "kube-ovn's JOIN_CIDR")
	for _, k := range kind {
		for _, p := range platform {
			if k.pfx.Overlaps(p.pfx) {
				v.fail(k.path, "%s (%s) overlaps %s %s (%s): two allocators would hand out the same addresses; make them disjoint (Cozystack's e2e uses 100.65.0.0/16 for the cluster's pod range, hack/sandbox-cidr-disjoint.bats)",
					k.cidr, k.what, p.path, p.cidr, p.what)
			}
		}
	}
}

// ParseRange reads an IPv4 address range "first-last" (MetalLB's form).
func ParseRange(r string) (netip.Addr, netip.Addr, error) {
	a, b, ok := strings.Cut(r, "-")
	if !ok {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q is not a range first-last (172.18.255.200-172.18.255.250)", r)
	}
	first, err1 := netip.ParseAddr(strings.TrimSpace(a))
	last, err2 := netip.ParseAddr(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || !first.Is4() || !last.Is4() {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q: both ends must be IPv4 addresses", r)
	}
	if last.Less(first) {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q ends before it starts", r)
	}
	return first, last, nil
}
