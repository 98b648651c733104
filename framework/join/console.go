package join

import (
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
)

// consoleState is what the harness read so far from one VMI's serial console (its latest stream:
// the console subresource, or the launcher's current guest-console-log container).
type consoleState struct {
	Pod    string
	Source string
	Lines  int
	Last   string    // the last line
	LastAt time.Time // when it was read
	// Joined says a line said the guest joined; Refused is the latest line in which a join
	// attempt failed, RefusedAt when it was read (zero for a line heard before its pool's words
	// were known) and Refusals how many such lines there were. A failed attempt is no final
	// state: Kairos's kubeadm provider runs kubeadm join again until it succeeds (suspect.go,
	// consoleRefusal).
	Joined    bool
	Refused   string
	RefusedAt time.Time
	Refusals  int
	// Err is why the console cannot be read right now.
	Err string
	// Lost is why the console stopped being read while the VMI runs (another client took it),
	// and LostAt when: from then on the guest's boot and join cannot be seen on it.
	Lost   string
	LostAt time.Time
}

// consoles hears the run's console hub and keeps, per VMI UID, what its console said, judged
// with the words of its pool's OS family. Each new line pokes the join loop.
type consoles struct {
	poke func()

	mu    sync.Mutex
	state map[string]*consoleState // by VMI UID
	words map[string]osfamily.Family
	// pending are the lines of a VMI heard before its pool's words were known.
	pending map[string][]string
}

// maxPending bounds the lines kept of a VMI whose pool is not known yet.
const maxPending = 2000

func newConsoles(poke func()) *consoles {
	return &consoles{poke: poke, state: map[string]*consoleState{}, words: map[string]osfamily.Family{}, pending: map[string][]string{}}
}

// judge says which OS family's words judge the console of VMI uid.
func (c *consoles) judge(uid string, os osfamily.Family) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.words[uid]; ok {
		return
	}
	c.words[uid] = os
	if st := c.state[uid]; st != nil {
		for _, text := range c.pending[uid] {
			st.match(os, time.Time{}, text)
		}
	}
	delete(c.pending, uid)
}

// match judges one line, read at at, with the words of os.
func (st *consoleState) match(os osfamily.Family, at time.Time, text string) {
	if os.ConsoleJoined != nil && os.ConsoleJoined.MatchString(text) {
		st.Joined = true
	}
	if os.ConsoleRefused != nil && os.ConsoleRefused.MatchString(text) {
		st.Refused, st.RefusedAt = text, at
		st.Refusals++
	}
}

// get is a copy of the console state of VMI uid; false when nothing of it was heard.
func (c *consoles) get(uid string) (consoleState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.state[uid]
	if !ok {
		return consoleState{}, false
	}
	return *st, true
}

func (c *consoles) Started(s serialconsole.Stream) {
	c.mu.Lock()
	prev := c.state[string(s.VMIUID)]
	st := &consoleState{Pod: s.Pod, Source: s.Source}
	if prev != nil {
		// A new instance of the launcher's console container: what the guest said before
		// still stands.
		st.Joined, st.Refused, st.RefusedAt, st.Refusals = prev.Joined, prev.Refused, prev.RefusedAt, prev.Refusals
		st.Lines, st.Last, st.LastAt = prev.Lines, prev.Last, prev.LastAt
	}
	c.state[string(s.VMIUID)] = st
	c.mu.Unlock()
	c.poke()
}

func (c *consoles) Line(s serialconsole.Stream, at time.Time, text string) {
	c.mu.Lock()
	st := c.state[string(s.VMIUID)]
	if st == nil {
		c.mu.Unlock()
		return
	}
	st.Lines++
	st.Last, st.LastAt, st.Err = text, at, ""
	uid := string(s.VMIUID)
	if os, ok := c.words[uid]; ok {
		st.match(os, at, text)
	} else if len(c.pending[uid]) < maxPending {
		c.pending[uid] = append(c.pending[uid], text)
	}
	c.mu.Unlock()
	c.poke()
}

func (c *consoles) Unreadable(s serialconsole.Stream, _ time.Time, why string) {
	c.mu.Lock()
	if st := c.state[string(s.VMIUID)]; st != nil {
		st.Err = why
	}
	c.mu.Unlock()
	c.poke()
}

func (c *consoles) Ended(s serialconsole.Stream, at time.Time, reason string) {
	c.mu.Lock()
	if st := c.state[string(s.VMIUID)]; st != nil && s.Source == serialconsole.SourceSubresource {
		st.Lost, st.LostAt = reason, at
	}
	c.mu.Unlock()
	c.poke()
}
