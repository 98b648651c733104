package realupstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/clientcmd"
)

// isolation runs a controller in network and mount namespaces of its own (unshare(1) of
// util-linux), for an upstream controller that binds fixed ports on every interface or reads fixed
// paths: two worlds on one machine would otherwise collide, and the controller would write
// outside its folder.
//
//   - Its mount namespace has a private tmpfs on /run (so /var/run) holding Files, and nothing
//     else there.
//   - Its network namespace has only a loopback, brought up here, with PodCIDR on it as a local
//     range: a dial to a pod IP answers on that loopback and never leaves the namespace.
//   - The apiserver of Kubeconfig is reached at the same address inside, through a relay this
//     process listens with inside the namespace and forwards to the real apiserver.
//
// Joining another network namespace needs CAP_SYS_ADMIN: the sim then runs as root, as on the
// project's machines and CI.
type isolation struct {
	// Dir holds the markers the wrapper and this process hand each other.
	Dir        string
	Kubeconfig string
	PodCIDR    string
	// Files maps a path under /run inside to the file copied there.
	Files map[string]string
	// PodMetricsDir, when set, routes PodCIDR to a pod network (podNetwork) whose port 8443
	// serves, for each pod IP, the file of that name here; otherwise PodCIDR is local on the
	// controller's own loopback.
	PodMetricsDir string
	// RealPodCIDRs are the pod ranges of real Nodes on this host, reached from inside through
	// the pod network's relay (podNetwork.Relay); only with PodMetricsDir.
	RealPodCIDRs []string

	pods *podNetwork
	// stopHooked: the controller's Stop closes the relay (set on the first start).
	stopHooked bool

	apiserver string // host:port of the apiserver, the same inside and out
	mu        sync.Mutex
	ln        net.Listener
	conns     map[net.Conn]struct{}
}

// podMetricsPort is the port a pod's metrics are read on: CDI's importer serves its progress
// on container port 8443, named metrics (pkg/controller/import-controller.go lines 995-1001).
const podMetricsPort = 8443

const (
	markerNamespaces = "namespaces-ready"
	markerNetwork    = "network-ready"
)

// wrap points c at unshare(1) running a shell that prepares the namespaces, waits for this
// process to set up the network, then execs env(1) with vars and c's binary with args (so c's pid
// is the controller's once it runs).
func (i *isolation) wrap(c *Controller, vars, args []string) ([]string, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("upstream: %s runs in namespaces of its own and needs unshare(1) (util-linux): %w", c.Name, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", i.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", i.Kubeconfig, err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Port() == "" {
		return nil, fmt.Errorf("upstream: %s: server %q has no host:port", i.Kubeconfig, cfg.Host)
	}
	i.apiserver = u.Host
	if err := os.MkdirAll(i.Dir, 0o700); err != nil {
		return nil, err
	}
	for _, m := range []string{markerNamespaces, markerNetwork} {
		if err := os.Remove(filepath.Join(i.Dir, m)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	script := []string{"set -e", "mount -t tmpfs -o mode=0755 tmpfs /run"}
	inside := make([]string, 0, len(i.Files))
	for in := range i.Files {
		inside = append(inside, in)
	}
	sort.Strings(inside)
	for _, in := range inside {
		if !strings.HasPrefix(in, "/run/") {
			return nil, fmt.Errorf("upstream: %s: %s is not under /run", c.Name, in)
		}
		script = append(script, "mkdir -p "+quote(path.Dir(in)), "cp "+quote(i.Files[in])+" "+quote(in))
	}
	script = append(script,
		": >"+quote(filepath.Join(i.Dir, markerNamespaces)),
		"n=0",
		"while [ ! -e "+quote(filepath.Join(i.Dir, markerNetwork))+" ]; do n=$((n+1)); [ $n -lt 3000 ] || { echo 'no network after 60s' >&2; exit 1; }; sleep 0.02; done",
		`exec env "$@"`)
	binary := c.Path
	c.Path = unshare
	out := []string{"--net", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", strings.Join(script, "\n"), "sh"}
	out = append(out, vars...)
	return append(append(out, binary), args...), nil
}

// start runs c, sets up its network once its namespaces exist, and waits for ready. On failure c
// is stopped.
func (i *isolation) start(ctx context.Context, c *Controller, ready func(context.Context) error) error {
	c.Started = time.Now()
	if !i.stopHooked {
		c.onStop = append(c.onStop, i.close)
		i.stopHooked = true
	}
	if err := c.Start(); err != nil {
		return err
	}
	err := c.WaitFor(ctx, "in its namespaces", func(context.Context) error {
		_, err := os.Stat(filepath.Join(i.Dir, markerNamespaces))
		return err
	})
	if err == nil && i.PodMetricsDir != "" {
		i.pods = &podNetwork{MetricsDir: i.PodMetricsDir, Port: podMetricsPort}
		for _, r := range i.RealPodCIDRs {
			pfx, perr := netip.ParsePrefix(r)
			if perr != nil {
				err = errors.Join(err, fmt.Errorf("real Node pod range %q: %w", r, perr))
			}
			i.pods.Relay = append(i.pods.Relay, pfx.Masked())
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", c.Name, err)
		} else if err = i.pods.start(c.Pid(), i.PodCIDR); err != nil {
			err = fmt.Errorf("%s: its pod network: %w", c.Name, err)
		}
	}
	if err == nil {
		if err = i.network(c.Pid()); err != nil {
			err = fmt.Errorf("%s: setting up its network namespace: %w", c.Name, err)
		}
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(i.Dir, markerNetwork), nil, 0o600)
	}
	if err == nil {
		err = c.WaitFor(ctx, "ready", ready)
	}
	if err != nil {
		c.Stop(5 * time.Second)
		return err
	}
	c.Ready = time.Since(c.Started)
	return nil
}

// restart starts c again after it exited: the relay and pod network of its old namespaces are
// closed, the markers removed, and the new process gets namespaces of its own as at first.
func (i *isolation) restart(ctx context.Context, c *Controller, ready func(context.Context) error) error {
	i.close()
	for _, m := range []string{markerNamespaces, markerNetwork} {
		if err := os.Remove(filepath.Join(i.Dir, m)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return i.start(ctx, c, ready)
}

// network joins pid's network namespace on a thread of its own, brings its loopback up with
// PodCIDR on it, opens the apiserver relay's listener there and returns to this process's
// namespace; the relay then serves from any thread.
func (i *isolation) network(pid int) error {
	if err := inNetns(pid, i.inside); err != nil {
		return err
	}
	go i.relay()
	return nil
}

// inside runs in the controller's network namespace.
func (i *isolation) inside() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	lo, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, lo); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	lo.SetUint16(lo.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, lo); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	if i.PodCIDR != "" && i.pods == nil {
		p, err := netip.ParsePrefix(i.PodCIDR)
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("pod CIDR %q is not an IPv4 prefix", i.PodCIDR)
		}
		addr, err := unix.NewIfreq("lo:1")
		if err != nil {
			return err
		}
		if err := addr.SetInet4Addr(p.Addr().AsSlice()); err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCSIFADDR, addr); err != nil {
			return fmt.Errorf("lo:1 address %s: %w", p.Addr(), err)
		}
		mask, err := unix.NewIfreq("lo:1")
		if err != nil {
			return err
		}
		if err := mask.SetInet4Addr(net.CIDRMask(p.Bits(), 32)); err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCSIFNETMASK, mask); err != nil {
			return fmt.Errorf("lo:1 netmask /%d: %w", p.Bits(), err)
		}
	}
	ln, err := net.Listen("tcp", i.apiserver)
	if err != nil {
		return fmt.Errorf("apiserver relay on %s: %w", i.apiserver, err)
	}
	i.mu.Lock()
	i.ln, i.conns = ln, map[net.Conn]struct{}{}
	i.mu.Unlock()
	return nil
}

// relay forwards each connection made inside to the apiserver, byte for byte (TLS ends at the
// apiserver).
func (i *isolation) relay() {
	i.mu.Lock()
	ln := i.ln
	i.mu.Unlock()
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go i.pipe(in)
	}
}

func (i *isolation) pipe(in net.Conn) {
	out, err := net.DialTimeout("tcp", i.apiserver, 5*time.Second)
	if err != nil {
		in.Close()
		return
	}
	if !i.track(in, out) {
		return
	}
	splice(in, out)
	i.untrack(in, out)
}

func (i *isolation) track(conns ...net.Conn) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.conns == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		i.conns[c] = struct{}{}
	}
	return true
}

func (i *isolation) untrack(conns ...net.Conn) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(i.conns, c)
	}
}

// close ends the relay and its connections, and the pod network. Idempotent.
func (i *isolation) close() {
	if i.pods != nil {
		i.pods.close()
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.ln != nil {
		i.ln.Close()
	}
	for c := range i.conns {
		c.Close()
	}
	i.conns = nil
}

// quote is s as one sh word.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
