package controlplane

import (
	"net"
	"sync"
)

// The processes the harness starts take their ports as flags, so a port is found free here,
// released, and bound by the child a moment later. Within that moment the kernel may hand the
// same port to the next caller: two sequential asks have returned one port twice, and a
// controller then failed with "bind: address already in use" for its own metrics server.
// portBook remembers every port handed out in this process and never hands one out again.
// It is process-wide because the kernel's port space is.
var portBook = struct {
	sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}

// FreePort asks the kernel for a free loopback port that this process has not handed out before.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct free loopback ports, none handed out before by this process.
// Listeners stay open until all n are found, so the kernel cannot repeat one among them.
func FreePorts(n int) ([]int, error) {
	portBook.Lock()
	defer portBook.Unlock()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
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
