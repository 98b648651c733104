package guest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/sim/node"
)

// waitUp waits until the real guest of the VMI is up: its init answers node.GuestUp over HTTP
// on node.GuestUpPort once its network is, reached at the address virt-handler reports for the
// VMI's pod network (with the masquerade binding, the launcher Pod's, which forwards every port
// to the guest: kubevirt.io/kubevirt v1.8.4 pkg/network/setup/netpod/masquerade/masquerade.go:191-214).
// Asking over the network takes the serial console from no one, where a second console
// connection would close the harness's. It gives up with ctx, saying where it stood.
func (gu *guest) waitUp(ctx context.Context) error {
	hc := &http.Client{Timeout: 3 * time.Second}
	last := "no address on the VMI yet"
	for {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := gu.g.c.Get(ctx, client.ObjectKeyFromObject(gu.vmi), vmi); err != nil {
			last = "the VMI: " + err.Error()
		} else if ip := podAddress(vmi); ip != "" {
			up, where := askUp(ctx, hc, ip)
			if up {
				return nil
			}
			last = where
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the guest to answer %q on :%d: %w (last: %s)", node.GuestUp, node.GuestUpPort, ctx.Err(), last)
		case <-time.After(time.Second):
		}
	}
}

// podAddress is the address virt-handler reports for the VMI's pod network interface, or "".
func podAddress(vmi *kubevirtv1.VirtualMachineInstance) string {
	pod := ""
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			pod = n.Name
		}
	}
	for _, i := range vmi.Status.Interfaces {
		if i.Name == pod && i.IP != "" {
			return i.IP
		}
	}
	return ""
}

// askUp asks the guest at ip whether it is up.
func askUp(ctx context.Context, hc *http.Client, ip string) (bool, string) {
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(node.GuestUpPort)) + "/up"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), node.GuestUp) {
		return false, fmt.Sprintf("GET %s: %s %q (%v)", url, resp.Status, body, err)
	}
	return true, ""
}
