package lane

import "github.com/cozystack/cozy-e2e/internal/install/assumptions"

// PlatformNetworking is the platform's networking values a lane may set.
type PlatformNetworking struct {
	// PodCIDR is kube-ovn's POD_CIDR, where it hands pods their addresses.
	PodCIDR string `json:"podCIDR,omitempty"`
	// JoinCIDR is kube-ovn's JOIN_CIDR, the nodes' addresses on its join network.
	JoinCIDR string `json:"joinCIDR,omitempty"`
}

// PodCIDR is the platform's pod range: the lane's, or the platform's default.
func (p *Platform) PodCIDR() string {
	if p != nil && p.Networking != nil && p.Networking.PodCIDR != "" {
		return p.Networking.PodCIDR
	}
	return assumptions.PlatformPodCIDR
}

// JoinCIDR is the platform's join range: the lane's, or the platform's default.
func (p *Platform) JoinCIDR() string {
	if p != nil && p.Networking != nil && p.Networking.JoinCIDR != "" {
		return p.Networking.JoinCIDR
	}
	return assumptions.PlatformJoinCIDR
}
