package realupstream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/util/cert"
)

// podNetwork is where an isolated controller's dials to pod IPs land: a second network namespace
// of the sim's own (held by a sleeping process), joined to the controller's by a veth pair on a
// link-local /30, with the pod range on its loopback. Its one listener on the pod port answers
// for every pod IP with the file of that IP in MetricsDir (what the pod's container serves,
// written by its stand-in). Traffic stays between the two namespaces the sim made.
//
// Relay are the pod ranges of real Nodes on this host (internal/sim/node): routed there too, and
// a connection to an address in one is relayed, byte for byte, to the same address and port from
// the harness's own network namespace, where the real Node's pods are (TLS ends at the pod).
type podNetwork struct {
	MetricsDir string
	Port       int
	Relay      []netip.Prefix

	holder *exec.Cmd
	srv    *http.Server
	relay  *relayListener
}

// podLink is the /30 joining the controller's namespace (.1) and the pod namespace (.2).
var podLink = netip.MustParsePrefix("169.254.44.0/30")

// start makes the pod namespace, joins it to pid's network namespace and routes cidr there.
func (p *podNetwork) start(pid int, cidr string) error {
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("pod CIDR %q: %w", cidr, err)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("the pod network needs ip(8) (iproute2): %w", err)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return fmt.Errorf("the pod network needs nsenter(1) (util-linux): %w", err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return err
	}
	p.holder = exec.Command(unshare, "--net", "--", "sleep", "infinity")
	p.holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.holder.Start(); err != nil {
		return fmt.Errorf("pod network namespace: %w", err)
	}
	holder := strconv.Itoa(p.holder.Process.Pid)
	if err := waitNewNetns(p.holder.Process.Pid); err != nil {
		return err
	}
	ctl := strconv.Itoa(pid)
	a, b := podLink.Addr().Next(), podLink.Addr().Next().Next()
	bits := strconv.Itoa(podLink.Bits())
	steps := [][]string{
		{ip, "link", "add", "name", "sim-pods0", "netns", ctl, "type", "veth", "peer", "name", "sim-pods1", "netns", holder},
		{nsenter, "-t", ctl, "-n", ip, "addr", "add", a.String() + "/" + bits, "dev", "sim-pods0"},
		{nsenter, "-t", ctl, "-n", ip, "link", "set", "sim-pods0", "up"},
		{nsenter, "-t", ctl, "-n", ip, "route", "add", pfx.Masked().String(), "via", b.String()},
		{nsenter, "-t", holder, "-n", ip, "link", "set", "lo", "up"},
		{nsenter, "-t", holder, "-n", ip, "addr", "add", b.String() + "/" + bits, "dev", "sim-pods1"},
		{nsenter, "-t", holder, "-n", ip, "link", "set", "sim-pods1", "up"},
		{nsenter, "-t", holder, "-n", ip, "addr", "add", cidr, "dev", "lo"},
	}
	for _, r := range p.Relay {
		steps = append(steps,
			[]string{nsenter, "-t", ctl, "-n", ip, "route", "add", r.Masked().String(), "via", b.String()},
			[]string{nsenter, "-t", holder, "-n", ip, "route", "add", "local", r.Masked().String(), "dev", "lo"})
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	ln, err := listenIn(p.holder.Process.Pid, fmt.Sprintf(":%d", p.Port))
	if err != nil {
		return err
	}
	crt, key, err := cert.GenerateSelfSignedCertKey("sim-pod", nil, nil)
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return err
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	p.relay = &relayListener{Listener: ln, relay: p.Relay, open: map[net.Conn]bool{}}
	go func() { _ = p.srv.ServeTLS(p.relay, "", "") }()
	return nil
}

// relayListener hands the server the connections to the sim's own pods and relays the rest,
// keeping both ends of each relayed connection until it ends or the pod network closes.
type relayListener struct {
	net.Listener
	relay []netip.Prefix

	mu     sync.Mutex
	open   map[net.Conn]bool
	closed bool
}

func (l *relayListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		to, ok := c.LocalAddr().(*net.TCPAddr)
		if !ok || !l.relayed(to.AddrPort().Addr().Unmap()) {
			return c, nil
		}
		go l.relayTo(c, to.String())
	}
}

// track keeps c until untrack, or closes it at once when the pod network is closed.
func (l *relayListener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return false
	}
	l.open[c] = true
	return true
}

func (l *relayListener) untrack(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.open, c)
	_ = c.Close()
}

// closeRelayed ends every relayed connection, both its ends, and any relayed after.
func (l *relayListener) closeRelayed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for c := range l.open {
		_ = c.Close()
	}
	l.open = map[net.Conn]bool{}
}

func (l *relayListener) relayed(a netip.Addr) bool {
	for _, r := range l.relay {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// relayTo pipes in to addr, dialled from this process's network namespace, until both ends
// closed or the pod network closes.
func (l *relayListener) relayTo(in net.Conn, addr string) {
	if !l.track(in) {
		return
	}
	defer l.untrack(in)
	out, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return // the dialler sees its connection closed, as a pod gone would close it
	}
	if !l.track(out) {
		return
	}
	defer l.untrack(out)
	splice(in, out)
}

// serve answers with the file of the dialled pod IP.
func (p *podNetwork) serve(w http.ResponseWriter, r *http.Request) {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		http.Error(w, "no local address", http.StatusInternalServerError)
		return
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil || r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	data, err := os.ReadFile(filepath.Join(p.MetricsDir, host))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write(data)
}

// close stops the listener, the relayed connections and the namespace's holder. Idempotent.
func (p *podNetwork) close() {
	if p.srv != nil {
		_ = p.srv.Close()
	}
	if p.relay != nil {
		p.relay.closeRelayed()
	}
	if p.holder != nil && p.holder.Process != nil {
		_ = p.holder.Process.Kill()
		_, _ = p.holder.Process.Wait()
		p.holder = nil
	}
}

// waitNewNetns waits until pid runs in a network namespace other than this process's.
func waitNewNetns(pid int) error {
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	for i := 0; i < 200; i++ {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && ns != own {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("the pod network namespace did not appear within 2s")
}

// listenIn opens a TCP listener on addr inside pid's network namespace.
func listenIn(pid int, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNetns(pid, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil && ln != nil {
		ln.Close()
		ln = nil
	}
	return ln, err
}
