package controlplane

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The processes the harness starts take their ports as flags, so a port is found free here,
// released, and bound by the child a moment later. Within that moment the kernel may hand the
// same port to the next caller: two sequential asks have returned one port twice, and a
// controller then failed with "bind: address already in use" for its own metrics server.
//
// So ports are drawn at random below the kernel's ephemeral range, where neither bind(":0")
// nor an outgoing connection of any process on the machine takes them, and portBook
// remembers every port handed out in this process and never hands one out again. Two test
// binaries drawing from the same range at once collide only if they draw the same port within
// the moment between the check and the bind. portBook is process-wide because the kernel's
// port space is.
var portBook = struct {
	sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}

// Ports drawn at random lie in [portsLow, ephemeral low end); a machine whose ephemeral range
// starts lower than portsLow+portsMinSpan gets ports from the kernel instead.
const (
	portsLow     = 10000
	portsMinSpan = 4096
)

// FreePort returns a free loopback port that this process has not handed out before.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct free loopback ports, none handed out before by this process.
// Listeners stay open until all n are found.
func FreePorts(n int) ([]int, error) {
	portBook.Lock()
	defer portBook.Unlock()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	high := ephemeralLow()
	ports := make([]int, 0, n)
	var last error
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("controlplane: no free loopback port after %d tries; last: %v", tries, last)
		}
		addr := "127.0.0.1:0"
		if high-portsLow >= portsMinSpan {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(portsLow+rand.IntN(high-portsLow)))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			last = err // taken by someone else: draw again
			continue
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if portBook.given[port] {
			continue
		}
		portBook.given[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// ephemeralLow is the low end of the kernel's ephemeral port range, 0 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}
