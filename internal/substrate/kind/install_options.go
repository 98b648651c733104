package kind

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

func (s *Substrate) installOptions(ctx context.Context, c *cluster.Cluster) (install.Options, error) {
	var src install.PlatformSource
	if s.source != nil {
		src = *s.source
	} else {
		var err error
		if src, err = install.ResolvePlatformSource(s.lane, s.opts.PlatformSource); err != nil {
			return install.Options{}, &substrate.ConfigurationError{Err: err}
		}
	}
	ip, err := controlPlaneIP(ctx, c)
	if err != nil {
		return install.Options{}, err
	}
	lb := ""
	if s.lane.Kind != nil {
		lb = s.lane.Kind.LoadBalancerRange
	}
	if lb == "" {
		if lb, err = kindNetworkRange(ctx, Network(func(string) string { return s.opts.Network })); err != nil {
			return install.Options{}, err
		}
	}
	o := install.Options{Lane: s.lane, Source: src, ControlPlaneIP: ip, LoadBalancerRange: lb}
	o.Log = s.opts.Log
	o.Record = s.artifactWriter("gates.txt")
	o.PlatformRecord = s.artifactWriter("platform.txt")
	o.Emulation = s.lane.Kind != nil && s.lane.Kind.Emulation
	if a := s.opts.RegistryAuth; a != nil {
		o.PlatformSourceSecret = a.PullSecret()
	}
	return o, nil
}

// controlPlaneIP is the InternalIP of the control-plane node.
func controlPlaneIP(ctx context.Context, c *cluster.Cluster) (string, error) {
	var nodes corev1.NodeList
	if err := c.Client.List(ctx, &nodes, client.HasLabels{"node-role.kubernetes.io/control-plane"}); err != nil {
		return "", fmt.Errorf("list control-plane nodes: %w", err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && !strings.Contains(a.Address, ":") {
				return a.Address, nil
			}
		}
	}
	return "", fmt.Errorf("no control-plane Node with an IPv4 InternalIP")
}

// kindNetworkRange derives MetalLB's range from the IPv4 subnet of the nodes' docker network
// (NetworkEnv, else kind's "kind").
func kindNetworkRange(ctx context.Context, network string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", "network", "inspect", network, "--format", "{{json .IPAM.Config}}").Output()
	if err != nil {
		return "", fmt.Errorf("docker network inspect %s: %w", network, err)
	}
	var cfgs []struct{ Subnet string }
	if err := json.Unmarshal(out, &cfgs); err != nil {
		return "", fmt.Errorf("docker network inspect %s: %w", network, err)
	}
	for _, c := range cfgs {
		if !strings.Contains(c.Subnet, ":") {
			return install.RangeInSubnet(c.Subnet)
		}
	}
	return "", fmt.Errorf("docker network %s has no IPv4 subnet; set kind.loadBalancerRange in the lane", network)
}
