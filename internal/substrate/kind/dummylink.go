package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// errNoDummyLink: the kernel refused a link of type dummy. The chart's workers bind the pod
// network by bridge (Cozystack v1.6.1 packages/apps/kubernetes/templates/cluster.yaml:172-174,
// `bridge: {}`), and KubeVirt's bridge binding moves the pod's address onto a dummy link
// (kubevirt.io/kubevirt v1.8.4 pkg/network/setup/netpod/netpod.go:392-400, TypeDummy) in the
// launcher's network namespace, on the kernel the kind node shares with its host: without the
// link type every worker's VMI fails with "LinkAdd: operation not supported".
var errNoDummyLink = errors.New("this kernel cannot create a link of type dummy (CONFIG_DUMMY unset and no dummy module)")

// probeDummyLink creates a link of type dummy in a network namespace of its own (unshare(1) of
// util-linux, ip(8) of iproute2), which goes with the command: nothing of the host changes. As a
// user other than root the namespace is a user namespace's, where the kernel may refuse to load
// a dummy module it would load for root. It returns errNoDummyLink when the kernel says the link
// type is unknown or unsupported, another error when the probe could not run.
func probeDummyLink(ctx context.Context) error {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return fmt.Errorf("unshare(1) (util-linux) is not on PATH")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("ip(8) (iproute2) is not on PATH")
	}
	args := []string{"--net"}
	if os.Geteuid() != 0 {
		args = append(args, "--map-root-user")
	}
	args = append(args, "--", ip, "link", "add", "cze-probe0", "type", "dummy")
	out, err := exec.CommandContext(ctx, unshare, args...).CombinedOutput()
	return dummyLinkAnswer(err, string(out))
}

// dummyLinkAnswer reads what `ip link add ... type dummy` answered: iproute2 prints "Error:
// Unknown device type." or the kernel's "RTNETLINK answers: Operation not supported" when the
// link type is missing.
func dummyLinkAnswer(err error, out string) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(out)
	if strings.Contains(msg, "Unknown device type") || strings.Contains(msg, "not supported") {
		return fmt.Errorf("%w: %s", errNoDummyLink, firstLine(msg))
	}
	if msg == "" {
		msg = err.Error()
	}
	return fmt.Errorf("the probe did not run: %s", firstLine(msg))
}

// checkDummyLink is the preflight's finding on the dummy link type. A probe that could not run
// (no unshare or ip, no user namespaces) does not hold the lane up; it says so.
func checkDummyLink(ctx context.Context, h Host) Finding {
	f := Finding{Check: "dummy link"}
	switch err := h.DummyLink(ctx); {
	case err == nil:
		f.OK, f.Detail = true, "the kernel creates one (KubeVirt's bridge binding, which the chart's workers use, needs it)"
	case errors.Is(err, errNoDummyLink):
		f.Detail = err.Error() + "; KubeVirt's bridge binding, which the chart's workers use, needs one: load it (modprobe dummy) or run on a kernel built with CONFIG_DUMMY"
	default:
		f.OK, f.Detail = true, "not probed ("+err.Error()+"); KubeVirt's bridge binding, which the chart's workers use, needs the link type"
	}
	return f
}
