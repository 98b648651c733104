package progress

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-runewidth"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/cozystack/cozy-e2e/framework/join"
)

// IsTerminal reports whether w is a terminal a person watches (a TERM of "dumb" is not).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
}

// liveWidth is the width of a live area that is not a terminal (tests).
const liveWidth = 120

// liveRefresh is how often the live lines are redrawn.
const liveRefresh = 200 * time.Millisecond

// live is the live area on a terminal: mpb redraws the status lines in place and scrolls the
// permanent lines above them. It is redrawn on this package's own ticks, so Close can make sure
// the last lines are drawn before it ends.
type live struct {
	p       *mpb.Progress
	refresh chan any
	stop    chan struct{}
	ticking sync.WaitGroup
}

// newLive draws on out; out that is not a terminal (a test's buffer) is drawn to as one.
func newLive(out io.Writer) *live {
	tty := false
	if f, ok := out.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	l := &live{refresh: make(chan any), stop: make(chan struct{})}
	l.p = mpb.New(
		mpb.WithOutput(out),
		mpb.WithManualRefresh(l.refresh),
		mpb.ContainerOptional(mpb.ForceTTY(), !tty),
		mpb.ContainerOptional(mpb.WithWidth(liveWidth), !tty),
	)
	l.ticking.Add(1)
	go func() {
		defer l.ticking.Done()
		t := time.NewTicker(liveRefresh)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case now := <-t.C:
				select {
				case l.refresh <- now:
				case <-l.stop:
					return
				}
			}
		}
	}()
	return l
}

// Write prints a permanent line above the live lines (at the next redraw).
func (l *live) Write(p []byte) (int, error) { return l.p.Write(p) }

// close draws the area a last time, with the lines dropped before it gone and every line
// written before it shown, and ends it. Each refresh is taken only once the one before it is
// drawn, so the third means a whole redraw after the last write.
func (l *live) close() {
	close(l.stop)
	l.ticking.Wait()
	for i := 0; i < 3; i++ {
		l.refresh <- time.Now()
	}
	l.p.Shutdown()
}

// addBar gives u its live line.
func (c *Console) addBar(u *unit) {
	if c.live == nil {
		return
	}
	prio := c.priority(u)
	c.enqueue(func() {
		if u.bar != nil {
			return
		}
		u.bar = c.live.p.New(0, mpb.NopStyle(),
			mpb.BarPriority(prio),
			mpb.PrependDecorators(decor.Any(func(s decor.Statistics) string {
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.liveLine(u, c.o.Now(), s.AvailableWidth)
			})))
	})
}

// priority orders the live lines: the phase first, then the pools in the order they came.
func (c *Console) priority(u *unit) int {
	if !u.pool {
		return 0
	}
	return len(c.pools) + 1
}

// dropBar removes u's live line.
func (c *Console) dropBar(u *unit) {
	if c.live == nil {
		return
	}
	c.enqueue(func() {
		if u.bar != nil {
			u.bar.Abort(true)
			u.bar = nil
		}
	})
}

// machinePrefix is the Machine a join detail opens with.
var machinePrefix = regexp.MustCompile(`^Machine \S+: `)

// liveLine is u's status line, as wide as the terminal: a pool's stages as a bar, its stage,
// time there, workers past it and what it waits for; the phase's time and latest detail.
func (c *Console) liveLine(u *unit, now time.Time, width int) string {
	var s string
	if u.pool && u.lifecycle {
		s = fmt.Sprintf("  %-8s %s %s", u.name, orWord(u.stage, "starting"), secs(now.Sub(u.since)))
	} else if u.pool {
		n := len(join.Stages())
		done := min(u.passed, n)
		bar := strings.Repeat("=", done) + strings.Repeat(" ", n-done)
		if done < n {
			bar = strings.Repeat("=", done) + ">" + strings.Repeat(" ", n-done-1)
		}
		s = fmt.Sprintf("  %-8s [%s] %2d/%d %s %s", u.name, bar, done, n, orWord(u.stage, "starting"), secs(now.Sub(u.since)))
		if u.replicas > 0 {
			s += fmt.Sprintf(" · %d/%d past", u.past, u.replicas)
		}
	} else {
		s = fmt.Sprintf("  phase %s %s", u.name, secs(now.Sub(u.since)))
		if u.ceiling > 0 {
			s += fmt.Sprintf(" of %s", u.ceiling)
		}
	}
	if w := suspectWords(u, now); w != "" && u.pool {
		s += " · " + w
	}
	if u.detail != "" {
		// The pool's line names the pool; the Machine a detail opens with costs the width the
		// detail needs.
		s += " · " + machinePrefix.ReplaceAllString(strings.ReplaceAll(u.detail, "\n", " "), "")
	}
	if width <= 1 {
		width = liveWidth
	}
	return runewidth.Truncate(s, width-1, "…")
}
