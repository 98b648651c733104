package realupstream

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// An isolated controller's dial to a pod IP of the sim's own pods is answered with that pod's
// metrics file, and a dial to an address of a real Node's pod range (here this host's own
// address, standing for a real pod) reaches that address from the harness's network namespace
// through the pod network's relay, byte for byte.
func TestPodNetworkServesSimPodsAndRelaysRealOnes(t *testing.T) {
	if os.Geteuid() != 0 {
		testkit.Unavailable(t, "the pod network joins network namespaces, which needs root")
	}
	host := hostAddress(t)
	real, err := net.Listen("tcp", net.JoinHostPort(host.String(), fmt.Sprint(podMetricsPort)))
	if err != nil {
		t.Fatalf("a stand-in for a real pod's metrics port on this host: %v", err)
	}
	defer real.Close()
	go func() {
		for {
			c, err := real.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "real pod at %s got %s", c.LocalAddr(), line)
			}()
		}
	}()

	ctl := exec.Command("unshare", "--net", "--", "sleep", "infinity")
	ctl.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ctl.Process.Kill(); _, _ = ctl.Process.Wait() }()
	if err := waitNewNetns(ctl.Process.Pid); err != nil {
		t.Fatal(err)
	}
	metrics := t.TempDir()
	if err := os.WriteFile(filepath.Join(metrics, "10.244.0.7"), []byte("kubevirt_cdi_import_progress_total 42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &podNetwork{MetricsDir: metrics, Port: podMetricsPort, Relay: []netip.Prefix{netip.PrefixFrom(host, 32)}}
	if err := p.start(ctl.Process.Pid, "10.244.0.1/16"); err != nil {
		t.Fatal(err)
	}
	defer p.close()

	sim := dialIn(t, ctl.Process.Pid, "10.244.0.7:8443")
	tlsConn := tls.Client(sim, &tls.Config{InsecureSkipVerify: true}) // as CDI reads a pod's metrics
	if _, err := io.WriteString(tlsConn, "GET /metrics HTTP/1.0\r\nHost: 10.244.0.7\r\n\r\n"); err != nil {
		t.Fatalf("a sim pod's metrics from inside: %v", err)
	}
	body, _ := io.ReadAll(tlsConn)
	if !strings.Contains(string(body), "kubevirt_cdi_import_progress_total 42") {
		t.Errorf("a sim pod's metrics from inside: %q, want its file", body)
	}

	relayed := dialIn(t, ctl.Process.Pid, net.JoinHostPort(host.String(), fmt.Sprint(podMetricsPort)))
	defer relayed.Close()
	_ = relayed.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(relayed, "ping\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(relayed)
	want := fmt.Sprintf("real pod at %s got ping\n", net.JoinHostPort(host.String(), fmt.Sprint(podMetricsPort)))
	if string(got) != want {
		t.Errorf("a real Node's pod from inside, through the relay: %q, want %q", got, want)
	}

	// A relayed connection still open (the pod waits for its line) ends when the pod network
	// closes, not when its peer gives up.
	held := dialIn(t, ctl.Process.Pid, net.JoinHostPort(host.String(), fmt.Sprint(podMetricsPort)))
	defer held.Close()
	_ = held.SetDeadline(time.Now().Add(10 * time.Second))
	time.Sleep(200 * time.Millisecond) // the relay has dialled the pod
	start := time.Now()
	p.close()
	if _, err := held.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a relayed connection after the pod network closed: read %v after %s, want it ended", err, time.Since(start).Round(time.Millisecond))
	}
}

// dialIn dials addr over TCP from inside pid's network namespace.
func dialIn(t *testing.T, pid int, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	err := inNetns(pid, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatalf("dialling %s from inside the controller's namespace: %v", addr, err)
	}
	return c
}

// hostAddress is this host's address on its default route.
func hostAddress(t *testing.T) netip.Addr {
	t.Helper()
	c, err := net.Dial("udp4", "198.51.100.1:9")
	if err != nil {
		t.Fatalf("this host's address on its default route: %v", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
}
