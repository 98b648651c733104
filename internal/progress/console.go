package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"

	"github.com/cozystack/cozy-e2e/framework/join"
)

// DefaultHeartbeat is how often, at most, a waiting pool's state is repeated without a terminal.
const DefaultHeartbeat = 30 * time.Second

// passDelay is how long a stage passed waits for others passed at the same instant, so they
// share one line.
const passDelay = 300 * time.Millisecond

// Options configure a Console.
type Options struct {
	// Out is where a person reads the run: a terminal, or a CI log.
	Out io.Writer
	// Log gets every line, details included (harness.log).
	Log io.Writer
	// Live draws one status line per pool and one for the phase, redrawn in place, above which
	// permanent lines scroll (Out is a terminal). Without it, Out gets the permanent lines and
	// a heartbeat per waiting pool.
	Live bool
	// Heartbeat is the least time between two lines about one waiting pool (zero: 30s).
	Heartbeat time.Duration
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Console draws a run's events for a person. Safe for concurrent use.
type Console struct {
	o Options

	mu      sync.Mutex
	cond    *sync.Cond
	pools   map[string]*unit
	phases  []*unit            // the phases running, oldest first (phases.go)
	pass    map[string]*passed // stages passed at one instant, waiting for their line
	queue   []func()           // output in order, run outside mu by the writer
	closing bool
	closed  bool

	live    *live
	done    chan struct{} // the writer ended
	stopped chan struct{} // the ticker should end
	tickers sync.WaitGroup
}

// unit is a pool, or a phase that runs, as the console follows it.
type unit struct {
	name   string
	pool   bool
	stage  string
	detail string
	// since: at this stage (pool), running (phase); first: the pool's first event.
	since, first time.Time
	ceiling      time.Duration
	replicas     int
	past         int
	passed       int
	over         bool      // joined, failed, or (phase) ended
	lifecycle    bool      // a pool followed again after it joined, through a lifecycle spec's stages
	suspects     []Suspect // a pool's suspects, oldest first
	lastLine     time.Time // the last line a person saw about it
	bar          *mpb.Bar  // touched by the writer only
}

type passed struct {
	at     time.Time
	stages []string
	joined bool // the line holds the join's last stage
}

// NewConsole starts a console; Close ends it.
func NewConsole(o Options) *Console {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	c := &Console{o: o, pools: map[string]*unit{}, pass: map[string]*passed{}, done: make(chan struct{}), stopped: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	if o.Live {
		c.live = newLive(o.Out)
	}
	go c.writer()
	c.tickers.Add(1)
	go c.tick()
	return c
}

// Event takes one event of the run.
func (c *Console) Event(ev Event) {
	if ev.At.IsZero() {
		ev.At = c.o.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Pool != "" {
		c.flushPass(ev.Pool, ev.Kind == StagePassed, ev.At)
	}
	switch ev.Kind {
	case Detail:
		c.detail(ev)
	case StagePassed:
		c.stagePassed(ev)
	case Failure:
		c.failure(ev)
	case PhaseStart:
		c.phaseStart(ev)
	case PhaseEnd:
		c.phaseEnd(ev)
	default:
		c.logLine(ev.At, true, fmt.Sprintf("%s %s", ev.Kind, ev.Detail))
	}
}

// Sink is Event as a Sink.
func (c *Console) Sink() Sink { return c.Event }

// Printf is a permanent line of the harness's own ("e2e: lane sim ...", the verdict).
func (c *Console) Printf(format string, a ...any) { c.Line("e2e: " + fmt.Sprintf(format, a...)) }

// Plain is a permanent line without a time stamp (a block a person copies from).
func (c *Console) Plain(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = fmt.Fprintln(c.o.Log, text)
	if c.closed {
		_, _ = io.WriteString(c.o.Out, text+"\n")
		return
	}
	c.enqueue(func() { c.print(text) })
}

// Line is a permanent line, as it is (stamped with the time).
func (c *Console) Line(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.permanent(c.o.Now(), text)
}

// Detailf is a detail line of the harness's own: harness.log, and the phase's live line.
func (c *Console) Detailf(format string, a ...any) {
	c.Event(Event{Kind: Detail, Detail: "e2e: " + fmt.Sprintf(format, a...)})
}

// Lines is a writer whose lines are details (a substrate's or a suite's progress text).
func (c *Console) Lines() io.Writer { return Lines(c.Event) }

// LogOnly is a writer into harness.log alone (a suite's own output).
func (c *Console) LogOnly() io.Writer { return logOnly{c} }

type logOnly struct{ c *Console }

func (l logOnly) Write(p []byte) (int, error) {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.c.o.Log.Write(p)
}

// Close prints what is still waiting, ends the live lines and the heartbeat. Lines printed
// after it (Printf) go straight to Out. Idempotent.
func (c *Console) Close() {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	close(c.stopped)
	c.mu.Unlock()
	c.tickers.Wait()
	c.mu.Lock()
	for pool := range c.pass {
		c.flushPass(pool, false, time.Time{})
	}
	for _, u := range c.units() {
		c.dropBar(u)
	}
	c.closing = true
	c.cond.Broadcast()
	c.mu.Unlock()
	<-c.done
	if c.live != nil {
		c.live.close()
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

func (c *Console) detail(ev Event) {
	if ev.Pool == "" {
		if u := c.running(ev.Phase); u != nil {
			u.detail = ev.Detail
		}
		c.logLine(ev.At, true, ev.Detail)
		return
	}
	u := c.pool(ev.Pool, ev.At)
	c.reopen(u, ev)
	moved := ev.Stage != u.stage || ev.Detail != u.detail || len(ev.Suspects)+len(u.suspects) == 0
	if ev.Stage != u.stage {
		u.stage = ev.Stage
	}
	u.since, u.detail = ev.Since, ev.Detail
	if u.since.IsZero() {
		u.since = ev.At
	}
	if ev.Replicas > 0 {
		u.replicas = ev.Replicas
	}
	u.past = ev.Past
	past := ""
	if u.replicas > 0 {
		past = fmt.Sprintf("; %d of %d past", u.past, u.replicas)
	}
	if moved {
		c.logLine(ev.At, true, fmt.Sprintf("pool %s: %s: %s (at this stage %s%s)", ev.Pool, ev.Stage, ev.Detail, secs(ev.At.Sub(u.since)), past))
	}
	c.suspected(u, ev)
}

// suspected takes a pool's suspects from a detail: harness.log says which appeared and which
// upstream cleared; the pool's status line shows the oldest while any is left.
func (c *Console) suspected(u *unit, ev Event) {
	had := map[string]bool{}
	for _, s := range u.suspects {
		had[s.key()] = true
	}
	now := map[string]bool{}
	for _, s := range ev.Suspects {
		now[s.key()] = true
		if !had[s.key()] {
			c.logLine(ev.At, true, fmt.Sprintf("pool %s: suspect %s at %s since %s (%s): %s", ev.Pool, s.Class, s.Stage,
				s.Since.UTC().Format("15:04:05.000"), s.Object, s.Detail))
		}
	}
	for _, s := range u.suspects {
		if !now[s.key()] {
			c.logLine(ev.At, true, fmt.Sprintf("pool %s: suspect %s cleared after %s (%s)", ev.Pool, s.Class, secs(ev.At.Sub(s.Since)), s.Object))
		}
	}
	u.suspects = ev.Suspects
}

// suspectWords is a pool's oldest suspect in a few words, "" without one.
func suspectWords(u *unit, now time.Time) string {
	if len(u.suspects) == 0 {
		return ""
	}
	s := u.suspects[0]
	more := ""
	if n := len(u.suspects) - 1; n > 0 {
		more = fmt.Sprintf(" (+%d)", n)
	}
	return fmt.Sprintf("suspect %s %s%s: %s", s.Class, secs(now.Sub(s.Since)), more, s.Detail)
}

func (c *Console) stagePassed(ev Event) {
	u := c.pool(ev.Pool, ev.Since)
	c.reopen(u, ev)
	u.passed++
	p := c.pass[ev.Pool]
	if p == nil {
		p = &passed{at: ev.At}
		c.pass[ev.Pool] = p
	}
	p.stages = append(p.stages, fmt.Sprintf("%s %s", ev.Stage, secs(ev.At.Sub(ev.Since))))
	if ev.Stage == string(last()) {
		p.joined = true
		u.over = true
		c.flushPass(ev.Pool, false, time.Time{})
		c.dropBar(u)
	}
}

// reopen follows a pool again once it joined, when a lifecycle spec reports a stage of its own
// (one that is not a join stage) on it: its live line and heartbeat come back until the phase
// the spec runs in ends.
func (c *Console) reopen(u *unit, ev Event) {
	if !u.over || u.lifecycle || ev.Stage == "" || join.Stage(ev.Stage).Index() >= 0 {
		return
	}
	u.over, u.lifecycle = false, true
	u.first, u.since, u.passed, u.replicas, u.past = ev.At, ev.At, 0, 0, 0
	if !ev.Since.IsZero() {
		u.since = ev.Since
	}
	c.addBar(u)
}

// flushPass prints the stages pool passed at one instant, unless the next stage passed at
// that same instant (then it joins their line).
func (c *Console) flushPass(pool string, stagePassed bool, at time.Time) {
	p := c.pass[pool]
	if p == nil || (stagePassed && p.at.Equal(at)) {
		return
	}
	delete(c.pass, pool)
	line := fmt.Sprintf("pool %s: passed %s", pool, strings.Join(p.stages, ", "))
	if u := c.pools[pool]; u != nil && p.joined && u.over && u.passed >= len(join.Stages()) {
		line += fmt.Sprintf("; joined in %s", secs(p.at.Sub(u.first)))
	}
	c.permanent(p.at, line)
	if u := c.pools[pool]; u != nil {
		u.lastLine = p.at
	}
}

func (c *Console) failure(ev Event) {
	if ev.Pool != "" {
		u := c.pool(ev.Pool, ev.At)
		u.over = true
		u.lastLine = ev.At
		c.dropBar(u)
	}
	c.permanent(ev.At, "FAIL "+ev.Detail)
}

// pool is pool's unit, made (with its live line) at its first event.
func (c *Console) pool(name string, at time.Time) *unit {
	u := c.pools[name]
	if u == nil {
		u = &unit{name: name, pool: true, first: at, since: at, lastLine: at}
		c.pools[name] = u
		c.addBar(u)
	}
	return u
}

// permanent prints a line for good: Out (above the live lines) and harness.log.
func (c *Console) permanent(at time.Time, text string) {
	line := at.UTC().Format("15:04:05") + " " + text
	c.logLine(at, false, text)
	if c.closed {
		_, _ = io.WriteString(c.o.Out, line+"\n")
		return
	}
	c.enqueue(func() { c.print(line) })
}

// logLine writes one line to harness.log; details carry milliseconds.
func (c *Console) logLine(at time.Time, detail bool, text string) {
	stamp := at.UTC().Format("15:04:05")
	if detail {
		stamp = at.UTC().Format("15:04:05.000")
	}
	_, _ = fmt.Fprintf(c.o.Log, "%s %s\n", stamp, text)
}

func (c *Console) enqueue(f func()) {
	c.queue = append(c.queue, f)
	c.cond.Broadcast()
}

// writer runs the output in order, outside the lock: the live area reads the units under it
// while it draws.
func (c *Console) writer() {
	defer close(c.done)
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closing {
			c.cond.Wait()
		}
		q, closing := c.queue, c.closing
		c.queue = nil
		c.mu.Unlock()
		for _, f := range q {
			f()
		}
		if closing && len(q) == 0 {
			return
		}
	}
}

func (c *Console) print(line string) {
	if c.live != nil {
		if _, err := c.live.Write([]byte(line + "\n")); err == nil {
			return
		}
	}
	_, _ = io.WriteString(c.o.Out, line+"\n")
}
