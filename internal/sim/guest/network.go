package guest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/sim/bootdata"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// route is how a worker VM reaches its control plane endpoint, as the pod network would take it
// there: the endpoint's host resolved through the worker's extra /etc/hosts entries, else, for
// a management Service name (<svc>.<namespace>.svc[.<domain>]), through the management DNS to
// the Service's ClusterIP; a ClusterIP and port then lead where the Service leads (the sim's
// stand-in for kube-proxy: simenv.LoopbackAnnotation on the Service), a loopback address
// straight there. It returns the address to dial and the name TLS verifies (the endpoint's
// host, as the kubelet's bootstrap kubeconfig names it). An address nothing leads to is an
// error, as a connection that times out.
func route(ctx context.Context, c client.Reader, d bootdata.Data) (addr, serverName string, err error) {
	u, err := url.Parse(d.Endpoint)
	if err != nil || u.Hostname() == "" {
		return "", "", fmt.Errorf("control plane endpoint %q: not a URL", d.Endpoint)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	ip := host
	if h, ok := d.Hosts[host]; ok {
		ip = h
	} else if net.ParseIP(host) == nil {
		svc, err := serviceByName(ctx, c, host)
		if err != nil {
			return "", "", fmt.Errorf("dial tcp: lookup %s: no such host", host)
		}
		ip = svc.Spec.ClusterIP
	}
	if parsed := net.ParseIP(ip); parsed != nil && parsed.IsLoopback() {
		return net.JoinHostPort(ip, port), host, nil
	}
	p, _ := strconv.Atoi(port)
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		return "", "", err
	}
	for _, s := range svcs.Items {
		if s.Spec.ClusterIP != ip || len(s.Spec.Ports) == 0 || int(s.Spec.Ports[0].Port) != p {
			continue
		}
		if to := s.Annotations[simenv.LoopbackAnnotation]; to != "" {
			return to, host, nil
		}
	}
	return "", "", fmt.Errorf("dial tcp %s: i/o timeout", net.JoinHostPort(ip, port))
}

// serviceByName resolves <svc>.<namespace>.svc, optionally followed by a cluster domain, to
// that management Service.
func serviceByName(ctx context.Context, c client.Reader, host string) (*corev1.Service, error) {
	parts := strings.Split(host, ".")
	if len(parts) < 3 || parts[2] != "svc" {
		return nil, fmt.Errorf("%s is not a Service name", host)
	}
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: parts[1], Name: parts[0]}, &svc); err != nil {
		return nil, err
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, fmt.Errorf("%s has no ClusterIP", host)
	}
	return &svc, nil
}
