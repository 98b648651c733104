package simenv

import (
	"io"
	"sync"
)

// SerialPorts are the guests' serial ports, as KubeVirt exposes them through a VMI's console
// subresource: virt-handler connects the caller to the launcher's virt-serial0 socket, and a
// new connection closes the one before (kubevirt/kubevirt v1.8.4
// pkg/virt-handler/rest/console.go:266-272, "close current connection, if exists"). What a
// guest writes while nobody is connected is not kept for the next caller. Its zero value is
// ready; a nil *SerialPorts drops everything.
type SerialPorts struct {
	mu    sync.Mutex
	conns map[string]*SerialConn // by port key
}

// serialBuffer is how many writes a connection holds for a slow reader before it drops them.
const serialBuffer = 1024

// SerialConn is one connection to a serial port.
type SerialConn struct {
	data chan []byte
	once sync.Once
	done chan struct{}
	pend []byte
}

// Read returns what the guest wrote since the connection opened; io.ErrUnexpectedEOF once
// another connection took the port (the caller sees the socket close under it), io.EOF after
// Close.
func (c *SerialConn) Read(p []byte) (int, error) {
	if len(c.pend) == 0 {
		select {
		case b := <-c.data:
			c.pend = b
		case <-c.done:
			return 0, io.ErrUnexpectedEOF
		}
	}
	n := copy(p, c.pend)
	c.pend = c.pend[n:]
	return n, nil
}

// Done is closed when the connection ends.
func (c *SerialConn) Done() <-chan struct{} { return c.done }

func (c *SerialConn) end() { c.once.Do(func() { close(c.done) }) }

func portKey(namespace, vmi, uid string) string { return namespace + "/" + vmi + "/" + uid }

// Connect opens VMI vmi's (of UID uid) serial port, closing the connection open on it.
func (s *SerialPorts) Connect(namespace, vmi, uid string) *SerialConn {
	c := &SerialConn{data: make(chan []byte, serialBuffer), done: make(chan struct{})}
	if s == nil {
		c.end()
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = map[string]*SerialConn{}
	}
	k := portKey(namespace, vmi, uid)
	if old := s.conns[k]; old != nil {
		old.end()
	}
	s.conns[k] = c
	return c
}

// Disconnect ends c, if it is still the port's connection.
func (s *SerialPorts) Disconnect(namespace, vmi, uid string, c *SerialConn) {
	c.end()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := portKey(namespace, vmi, uid); s.conns[k] == c {
		delete(s.conns, k)
	}
}

// Write is the guest writing data to its serial port: the connected caller reads it; with
// nobody connected it is lost.
func (s *SerialPorts) Write(namespace, vmi, uid string, data []byte) {
	if s == nil {
		return
	}
	s.mu.Lock()
	c := s.conns[portKey(namespace, vmi, uid)]
	s.mu.Unlock()
	if c == nil {
		return
	}
	select {
	case c.data <- append([]byte(nil), data...):
	case <-c.done:
	default: // a reader this far behind loses bytes, as a serial line does
	}
}

// Hangup ends the connection of VMI vmi's port: the VMI stopped.
func (s *SerialPorts) Hangup(namespace, vmi, uid string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := portKey(namespace, vmi, uid)
	if c := s.conns[k]; c != nil {
		c.end()
		delete(s.conns, k)
	}
}

// Close ends every connection: the VMIs are gone.
func (s *SerialPorts) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.conns {
		c.end()
		delete(s.conns, k)
	}
}
