package serialconsole

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// ports are fake console subresources: one connection a VMI, a new one closes the one before
// (as virt-handler does), and bytes said while nobody is connected are lost.
type ports struct {
	mu      sync.Mutex
	refused map[string]error
	ok      map[string]bool
	n       map[string]int
	made    map[string]int
	conns   map[string]*fakeConn
}

func newPorts() *ports {
	return &ports{refused: map[string]error{}, ok: map[string]bool{}, n: map[string]int{}, made: map[string]int{}, conns: map[string]*fakeConn{}}
}

func (p *ports) dial(_ context.Context, namespace, vmi string) (Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[vmi]++
	if namespace != ns {
		return nil, fmt.Errorf("dialled namespace %q", namespace)
	}
	if err := p.refused[vmi]; err != nil && !p.ok[vmi] {
		return nil, err
	}
	if !p.ok[vmi] {
		return nil, errors.New("Virtual Machine not found.")
	}
	if old := p.conns[vmi]; old != nil {
		_ = old.w.CloseWithError(io.ErrUnexpectedEOF)
	}
	r, w := io.Pipe()
	fc := &fakeConn{r: r, w: w}
	p.made[vmi]++
	p.conns[vmi] = fc
	return fc, nil
}

func (p *ports) refuse(vmi string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused[vmi], p.ok[vmi] = err, false
}

func (p *ports) accept(vmi string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ok[vmi] = true
}

func (p *ports) dials(vmi string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[vmi]
}

// connections counts the connections that opened.
func (p *ports) connections(vmi string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.made[vmi]
}

func (p *ports) say(vmi string, lines ...string) {
	p.mu.Lock()
	fc := p.conns[vmi]
	p.mu.Unlock()
	if fc == nil {
		return
	}
	for _, l := range lines {
		_, _ = fc.w.Write([]byte(l + "\r\n"))
	}
}

// kick closes vmi's connection, as KubeVirt does when another client connects.
func (p *ports) kick(vmi string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fc := p.conns[vmi]; fc != nil {
		_ = fc.w.CloseWithError(io.ErrUnexpectedEOF)
		delete(p.conns, vmi)
	}
}

// open counts connections the hub has not closed.
func (p *ports) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, fc := range p.conns {
		if !fc.isClosed() {
			n++
		}
	}
	return n
}

type fakeConn struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	mu     sync.Mutex
	closed bool
}

func (c *fakeConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (c *fakeConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.r.Close()
}

func (c *fakeConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// recorder writes what it hears as lines of text.
type recorder struct {
	mu     sync.Mutex
	events []string
	stamps map[string]time.Time
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) Started(s Stream) {
	r.add(fmt.Sprintf("started %s %s pod=%s restart=%d uid=%s", s.VMI, s.Source, s.Pod, s.Restart, s.VMIUID))
}

func (r *recorder) Line(s Stream, at time.Time, text string) {
	r.mu.Lock()
	if r.stamps == nil {
		r.stamps = map[string]time.Time{}
	}
	r.stamps[text] = at
	r.mu.Unlock()
	r.add(fmt.Sprintf("line %s %s uid=%s", s.VMI, text, s.VMIUID))
}

func (r *recorder) Unreadable(s Stream, _ time.Time, why string) {
	r.add(fmt.Sprintf("unreadable %s %s", s.VMI, why))
}

func (r *recorder) Ended(s Stream, _ time.Time, reason string) {
	r.add(fmt.Sprintf("ended %s %s", s.VMI, reason))
}

func (r *recorder) has(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func (r *recorder) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func (r *recorder) hasAt(text string, at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stamps[text].Equal(at)
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, "\n")
}

// withoutUnreadable drops the "unreadable" news from a recorder's text.
func withoutUnreadable(text string) string {
	var kept []string
	for _, e := range strings.Split(text, "\n") {
		if !strings.HasPrefix(e, "unreadable ") {
			kept = append(kept, e)
		}
	}
	return strings.Join(kept, "\n")
}

// heardBy is the evidence of a wait that what r heard is.
func heardBy(r *recorder) func() string {
	return func() string { return "heard:\n" + r.text() }
}
