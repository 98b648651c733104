package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// The node is laid out as a kubeadm node is, where KubeVirt's node pieces look for it:
//
//   - the kubelet's root is /var/lib/kubelet: virt-handler mounts it and its pods folder from the
//     host by those paths (kubevirt.io/kubevirt v1.8.4 pkg/util/util.go:25-26,
//     pkg/virt-operator/resource/generate/components/daemonsets.go:313-336) and reaches the
//     launcher's sockets and the device-plugin registration socket through them;
//
//   - kube-proxy runs beside the kubelet (iptables mode, kube-proxy's default on Linux), so a Pod
//     that dials the kubernetes Service's ClusterIP, as every in-cluster client does, reaches
//     the apiserver at its advertised address;
//
//   - the host's root mount is shared (`mount --make-rshared /`, as systemd leaves it), because
//     containerd refuses a Bidirectional mount from a private one (containerd v1.6.20
//     pkg/cri/opts/spec_linux.go:184-189,229-243) and virt-handler asks for two
//     (daemonsets.go:315,318).
//
//   - its processes run in PID and mount namespaces of their own whose PID 1 is pause
//     (startInit), as a kind node's run in the node container's (where PID 1 is systemd): a hostPID Pod such as virt-handler
//     sees that namespace, and KubeVirt reaches the node through its PID 1, /proc/1/root and
//     /proc/1/ns/mnt (kubevirt.io/kubevirt v1.8.4 pkg/util/util.go:27,
//     pkg/virt-handler/virt-chroot/virt-chroot.go:33-34, the device plugins' health:
//     pkg/virt-handler/device-manager/generic_device.go:83). These machines' own PID 1 refuses
//     that to a root without CAP_SYS_RESOURCE ("open /proc/1/ns/mnt: permission denied",
//     measured); this namespace's PID 1 is this process's child, with its capabilities.
//
// Those are the host's, not a run folder's (the kubelet's device-plugin folder is
// /var/lib/kubelet/device-plugins whatever its root: k8s.io/kubelet v0.35.4
// pkg/apis/deviceplugin/v1beta1/constants.go:30-32), so one node runs on a host at a time, holding
// hostLock from Start to Stop; another Start waits for it, saying so.
const (
	// KubeletRoot is the node's kubelet root folder.
	KubeletRoot = "/var/lib/kubelet"
	hostLock    = "/run/cozy-e2e-node.lock"
	// rootMarker marks KubeletRoot as a node's of this package, so Start never takes over a
	// folder a kubelet of this host's own left.
	rootMarker = ".cozy-e2e-node"
)

// takeHost waits for the host's node lock (lockHost), makes / shared, removes what a node that
// died without Stop left (its bridge; its KubeletRoot when marked: claimRoot) and claims
// KubeletRoot.
func (n *Node) takeHost(ctx context.Context) error {
	if err := n.lockHost(ctx); err != nil {
		return err
	}
	if out, err := exec.Command("mount", "--make-rshared", "/").CombinedOutput(); err != nil {
		return fmt.Errorf("node %s: mount --make-rshared /: %v: %s", n.Name, err, out)
	}
	// a node that died without Stop left its bridge: under the lock no other node's is up
	ifaces, _ := net.Interfaces()
	for _, i := range ifaces {
		if strings.HasPrefix(i.Name, bridgePrefix) && i.Name != n.bridge {
			if out, err := exec.Command("ip", "link", "delete", i.Name).CombinedOutput(); err != nil {
				fmt.Fprintf(n.log, "node: removing the bridge %s a node that died without Stop left: %v: %s\n", i.Name, err, out)
			}
		}
	}
	return n.claimRoot()
}

// lockHost waits for the host's node lock, saying so once if another node holds it. It waits
// in flock(2) itself, so the kernel wakes it the moment the holder lets go: polling, it lost
// the lock to a test package whose next node took it again within milliseconds, and waited out
// its whole deadline (make test: 4m40s behind internal/sim/node's tests).
func (n *Node) lockHost(ctx context.Context) error {
	f, err := os.OpenFile(hostLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("node %s: the host's node lock: %w", n.Name, err)
	}
	start := time.Now()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("node %s: locking %s: %w", n.Name, hostLock, err)
		}
		holder, _ := os.ReadFile(hostLock)
		fmt.Fprintf(n.log, "node: %s waits for the host's node slot (%s, held by %s)\n", n.Name, hostLock, holder)
		got := make(chan error, 1)
		go func() { got <- unix.Flock(int(f.Fd()), unix.LOCK_EX) }()
		select {
		case err := <-got:
			if err != nil {
				f.Close()
				return fmt.Errorf("node %s: locking %s: %w", n.Name, hostLock, err)
			}
		case <-ctx.Done():
			// the wait goes on in flock; whatever it gets is let go at once
			go func() {
				if <-got == nil {
					_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
				}
				f.Close()
			}()
			return fmt.Errorf("node %s: the host's node slot (%s) still taken after %s: %w", n.Name, hostLock, time.Since(start).Round(time.Second), ctx.Err())
		}
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d, node %s, run folder %s", os.Getpid(), n.Name, n.l.dir)), 0)
	n.lock = f
	return nil
}

// claimRoot claims KubeletRoot under the host's lock: a root marked as a node's of this package
// (one that died without Stop) is cleared first; one without the marker is refused and left as
// it is.
func (n *Node) claimRoot() error {
	if _, err := os.Stat(KubeletRoot); err == nil {
		if _, err := os.Stat(filepath.Join(KubeletRoot, rootMarker)); err != nil {
			return fmt.Errorf("node %s: %s is there and is not this package's nodes' (no %s): a kubelet of this host may own it; move it away to run a real node here", n.Name, KubeletRoot, rootMarker)
		}
		// a node that died without Stop left it: unmount what it left, then start afresh
		unmountUnder(KubeletRoot+"/", n.log)
		if err := os.RemoveAll(KubeletRoot); err != nil {
			return fmt.Errorf("node %s: clearing the %s a node that died without Stop left: %w", n.Name, KubeletRoot, err)
		}
	}
	if err := os.MkdirAll(KubeletRoot, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(KubeletRoot, rootMarker), []byte(n.l.dir+"\n"), 0o644); err != nil {
		return err
	}
	n.claimed = true
	return nil
}

// releaseHost removes kube-proxy's rules, KubeletRoot if this node claimed it (after
// unmounting what is left under it; a root takeHost refused is left as it was) and lets the next
// node start.
func (n *Node) releaseHost() {
	if n.lock == nil {
		return
	}
	if n.claimed {
		if out, err := exec.Command(n.tools.Path("kube-proxy"), "--cleanup", "--v=0").CombinedOutput(); err != nil {
			fmt.Fprintf(n.log, "node: kube-proxy --cleanup: %v: %s\n", err, out)
		}
		unmountUnder(KubeletRoot+"/", n.log)
		if err := os.RemoveAll(KubeletRoot); err != nil {
			fmt.Fprintf(n.log, "node: removing %s: %v\n", KubeletRoot, err)
		}
		n.claimed = false
	}
	_ = unix.Flock(int(n.lock.Fd()), unix.LOCK_UN)
	n.lock.Close()
	n.lock = nil
}

// startKubeProxy writes kube-proxy's credentials (system:kube-proxy, which the apiserver's
// bootstrap ClusterRoleBinding system:node-proxier serves: k8s.io/kubernetes v1.35.4
// plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go:686) and configuration, and starts it.
func (n *Node) startKubeProxy(o Options) error {
	kp, err := o.APIServer.CA.Client("system:kube-proxy")
	if err != nil {
		return err
	}
	kubeconfig := n.l.path("kube-proxy", "kubeconfig")
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o755); err != nil {
		return err
	}
	cfg := &rest.Config{Host: o.APIServer.URL, TLSClientConfig: rest.TLSClientConfig{CAData: o.APIServer.CA.CertPEM, CertData: kp.CertPEM, KeyData: kp.KeyPEM}}
	if err := cluster.WriteKubeconfig(kubeconfig, "kube-proxy-"+n.Name, cfg); err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	config := n.l.path("kube-proxy", "config.yaml")
	if err := os.WriteFile(config, []byte(kubeProxyConfig(kubeconfig, n.Name, ports[0], ports[1])), 0o644); err != nil {
		return err
	}
	n.kubeProxy = &supervised{name: "kube-proxy", path: o.Tools.Path("kube-proxy"), args: []string{"--config=" + config, "--v=2"},
		logPath: n.l.path("logs", "kube-proxy.log"), log: n.log, pidns: n.pidns(), mntns: n.mntns()}
	return n.kubeProxy.start()
}

// kubeProxyConfig is kube-proxy's KubeProxyConfiguration (k8s.io/kube-proxy v0.35.4
// config/v1alpha1/types.go): iptables mode, its health and metrics servers on loopback ports of
// their own, and the conntrack settings left as the host has them (a zero maxPerCore and zero
// timeouts are "leave it": k8s.io/kubernetes v1.35.4 cmd/kube-proxy/app/server_linux.go:299-365),
// since a test host need not let it write them.
func kubeProxyConfig(kubeconfig, node string, healthzPort, metricsPort int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, node, healthzPort, metricsPort)
}

// HostAddress is this host's address on the interface of its default route: what a real
// node's world advertises its apiserver at (controlplane.APIServerOptions.AdvertiseAddress),
// since a Pod cannot reach the host's loopback. A UDP "connection" only picks the route; nothing
// is sent.
func HostAddress() (string, error) {
	c, err := net.Dial("udp4", "198.51.100.1:9")
	if err != nil {
		return "", fmt.Errorf("this host's address on its default route: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// startInit starts the node's init, pause, as PID 1 of a new PID namespace and a mount
// namespace of its own: a copy of the host's (whose mounts stay shared with it, / being shared)
// with a /proc of the new PID namespace over a private /proc, as a container's. The node's
// processes are born in both (spawn): a process that names itself by its own pid in /proc, as
// containerd does for a new network namespace (/proc/<pid>/task/<tid>/ns/net), finds itself
// there, which the host's /proc would not show under that pid.
func (n *Node) startInit(tools Tools) error {
	cmd := exec.Command("/bin/sh", "-c", `mount --make-rprivate /proc && mount -t proc proc /proc && exec "$0"`, tools.Path("pause"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("node %s: starting its PID namespace's init (%s): %w", n.Name, tools.Path("pause"), err)
	}
	n.init, n.initDone = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(n.initDone)
	}()
	// ready when PID 1 is pause, its /proc mounted
	for start := time.Now(); ; {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
		if exe == tools.Path("pause") {
			return nil
		}
		select {
		case <-n.initDone:
			return fmt.Errorf("node %s: its init ended before it ran pause: %v: %s", n.Name, cmd.ProcessState, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Since(start) > 10*time.Second {
			return fmt.Errorf("node %s: its init did not run pause within 10 s: %s", n.Name, out.String())
		}
	}
}

// pidns and mntns are the paths of the node's PID and mount namespaces.
func (n *Node) pidns() string { return fmt.Sprintf("/proc/%d/ns/pid", n.init.Process.Pid) }
func (n *Node) mntns() string { return fmt.Sprintf("/proc/%d/ns/mnt", n.init.Process.Pid) }

// stopInit ends the node's PID namespace and with it every process left in it.
func (n *Node) stopInit() {
	if n.init == nil {
		return
	}
	_ = n.init.Process.Kill()
	select {
	case <-n.initDone:
	case <-time.After(10 * time.Second):
		fmt.Fprintf(n.log, "node: the init of %s (pid %d) did not end 10 s after SIGKILL\n", n.Name, n.init.Process.Pid)
	}
	n.init = nil
}
