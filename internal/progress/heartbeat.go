package progress

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/join"
)

// The console's clock: stages passed flushed once they waited long enough, the heartbeat of a
// waiting pool, and the words of its state.

// tick flushes stages passed that waited long enough, and without a terminal repeats a
// waiting pool's state at most once per heartbeat.
func (c *Console) tick() {
	defer c.tickers.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.stopped:
			return
		case <-t.C:
		}
		c.mu.Lock()
		now := c.o.Now()
		for pool, p := range c.pass {
			if now.Sub(p.at) >= passDelay {
				c.flushPass(pool, false, time.Time{})
			}
		}
		if c.live == nil {
			c.heartbeats(now)
		}
		c.mu.Unlock()
	}
}

func (c *Console) heartbeats(now time.Time) {
	waiting := false
	for _, u := range c.units() {
		if !u.pool || u.over || u.stage == "" {
			continue
		}
		waiting = true
		if now.Sub(u.lastLine) >= c.o.Heartbeat {
			c.permanent(now, c.status(u, now))
			u.lastLine = now
		}
	}
	if p := c.running(""); p != nil && !waiting && now.Sub(p.lastLine) >= c.o.Heartbeat {
		c.permanent(now, c.status(p, now))
		p.lastLine = now
	}
}

// status is a unit's state in one line: a pool's stage, time there, workers past it and what
// it waits for; a phase's time and its latest detail.
func (c *Console) status(u *unit, now time.Time) string {
	if u.pool {
		s := fmt.Sprintf("pool %s: at %s %s", u.name, orWord(u.stage, "the start"), secs(now.Sub(u.since)))
		if u.replicas > 0 {
			s += fmt.Sprintf(", %d of %d past", u.past, u.replicas)
		}
		if u.detail != "" {
			s += ": " + clip(u.detail, 200)
		}
		if w := suspectWords(u, now); w != "" {
			s += "; " + clip(w, 200)
		}
		return s
	}
	s := fmt.Sprintf("phase %s %s", u.name, secs(now.Sub(u.since)))
	if u.ceiling > 0 {
		s += fmt.Sprintf(" of %s", u.ceiling)
	}
	if u.detail != "" {
		s += ": " + clip(u.detail, 200)
	}
	return s
}

// units are the pools in name order, then the phases running.
func (c *Console) units() []*unit {
	names := make([]string, 0, len(c.pools))
	for n := range c.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*unit, 0, len(names)+1)
	for _, n := range names {
		out = append(out, c.pools[n])
	}
	return append(out, c.phases...)
}

func last() join.Stage {
	s := join.Stages()
	return s[len(s)-1]
}

func secs(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func orWord(s, w string) string {
	if s == "" {
		return w
	}
	return s
}
