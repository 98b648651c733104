package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// connection would close the harness's. It returns the address the guest answered at, or gives
// up with ctx, saying where it stood.
func (gu *guest) waitUp(ctx context.Context) (string, error) {
	hc := &http.Client{Timeout: 3 * time.Second}
	last := "no address on the VMI yet"
	for {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := gu.g.c.Get(ctx, client.ObjectKeyFromObject(gu.vmi), vmi); err != nil {
			last = "the VMI: " + err.Error()
		} else if ip := podAddress(vmi); ip != "" {
			up, where := askUp(ctx, hc, ip)
			if up {
				return ip, nil
			}
			last = where
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the guest to answer %q on :%d: %w (last: %s)", node.GuestUp, node.GuestUpPort, ctx.Err(), last)
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
	body, err := guestGet(ctx, hc, ip, "/up")
	if err != nil {
		return false, err.Error()
	}
	if !strings.HasPrefix(body, node.GuestUp) {
		return false, fmt.Sprintf("GET /up: %q", body)
	}
	return true, ""
}

// guestGet reads path from the guest's HTTP server at ip.
func guestGet(ctx context.Context, hc *http.Client, ip, path string) (string, error) {
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(node.GuestUpPort)) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s %q (%v)", url, resp.Status, body, err)
	}
	return string(body), nil
}

// sameUserdata holds the join to the bootstrap data the real guest at ip read: the digest of the
// config drive's user data it serves (node.GuestUserdataDigest) must be that of the Secret the
// VMI names, which the join outside the guest reads. KubeVirt builds the config drive from that
// Secret when the domain starts (kubevirt.io/kubevirt v1.8.4 pkg/cloud-init/cloud-init.go:596-598,
// openstack/latest/user_data; :666, the ISO labelled config-2), so a
// difference means the guest did not get the data the join would act on.
func (gu *guest) sameUserdata(ctx context.Context, ip string) error {
	got, err := guestGet(ctx, &http.Client{Timeout: 3 * time.Second}, ip, node.GuestUserdataDigest)
	if err != nil {
		return fmt.Errorf("the guest's config drive digest: %w (the guest found no config drive, or could not read it: its console says which)", err)
	}
	raw, err := gu.rawUserdata(ctx)
	if err != nil {
		return err
	}
	want := sha256.Sum256(raw)
	if strings.TrimSpace(got) != hex.EncodeToString(want[:]) {
		return fmt.Errorf("the guest read user data of sha256 %s from its config drive, the Secret holds %x (%d bytes)", strings.TrimSpace(got), want, len(raw))
	}
	return nil
}
