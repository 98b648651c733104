package diag

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"sigs.k8s.io/yaml"
)

// collector is one on-failure collector. Collectors run one after another in the order given,
// cheapest and most discriminating first; each has a share of the diagnostics reserve as its
// time bound and the byte and count bounds of Limits.
type collector struct {
	name  string
	scope string
	// share is the part of the diagnostics reserve this collector may take.
	share float64
	// bytes and count are its byte and count bounds, for the manifest.
	bytes int64
	count int
	// key, when set, makes the collector run once per Recorder (cluster-wide collectors
	// shared by every failing pool); a second run returns the first one's entry.
	key string
	run func(ctx context.Context, w *work) error
}

// onceCache lets cluster-wide collectors run once however many pools fail at the same time.
type onceCache struct {
	mu    sync.Mutex
	slots map[string]*onceSlot
}

type onceSlot struct {
	done  chan struct{}
	entry Entry
}

// claim returns the slot for key and whether the caller must run the collector and fill it.
func (c *onceCache) claim(key string) (*onceSlot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slots == nil {
		c.slots = map[string]*onceSlot{}
	}
	if s, ok := c.slots[key]; ok {
		return s, false
	}
	s := &onceSlot{done: make(chan struct{})}
	c.slots[key] = s
	return s, true
}

// work is what one collector wrote.
type work struct {
	a      *Artifacts
	limits Limits
	paths  []string
	bytes  int64
	items  int
	// truncated says a bound cut something; notes are facts for the manifest.
	truncated []string
	notes     []string
}

func (w *work) file(rel string, data []byte, limit int64) error {
	cut, err := w.a.WriteFile(rel, data, limit)
	if err != nil {
		return err
	}
	w.record(rel, int64(len(data)), cut)
	return nil
}

func (w *work) yaml(rel string, v any, limit int64) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return w.file(rel, data, limit)
}

func (w *work) record(rel string, n int64, cut bool) {
	w.paths = append(w.paths, rel)
	w.bytes += n
	if cut {
		w.truncated = append(w.truncated, rel+" cut at its byte bound")
	}
}

func (w *work) note(format string, args ...any) {
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

// Budget is how much time the on-failure collectors have.
type Budget struct {
	// Clock is the run's clock: collectors run inside clock.Diagnostics and a collector that
	// cannot run is recorded as declined on it. Nil: only Reserve bounds them.
	Clock *budget.Clock
	// Reserve is the lane's diagnostics reserve (lane.Budget.DiagnosticsReserve).
	Reserve time.Duration
	// used is what earlier collections of the same recorder spent of the reserve: a
	// Recorder's collectors share one reserve however many times it is asked to collect.
	used time.Duration
}

// runCollectors runs cs inside the budget and records each in the manifest.
func runCollectors(ctx context.Context, a *Artifacts, m *Manifest, process string, limits Limits, now func() time.Time,
	b Budget, cs []collector, cache *onceCache) []Entry {
	start := now()
	reserve := max(b.Reserve-b.used, 0)
	cancel := context.CancelFunc(func() {})
	if b.Clock != nil {
		var left time.Duration
		ctx, cancel, left = b.Clock.Diagnostics(ctx)
		reserve = min(reserve, left)
	}
	defer cancel()
	deadline := start.Add(reserve)
	var out []Entry
	for _, c := range cs {
		var slot *onceSlot
		if c.key != "" && cache != nil {
			var mine bool
			if slot, mine = cache.claim(c.key); !mine {
				select {
				case <-slot.done:
					out = append(out, slot.entry)
				case <-ctx.Done():
				}
				continue
			}
		}
		bound := time.Duration(c.share * float64(b.Reserve))
		e := Entry{Name: c.name, Scope: c.scope, Process: process, Start: now(),
			Bound: Bound{Seconds: budget.Seconds(bound), Bytes: c.bytes, Count: c.count}}
		left := deadline.Sub(e.Start)
		if left < bound || ctx.Err() != nil {
			e.Status = Declined
			e.Error = fmt.Sprintf("needs up to %s, %s left of the %s diagnostics reserve", bound.Round(time.Millisecond),
				max(left, 0).Round(time.Millisecond), b.Reserve)
			if b.used > 0 {
				e.Error += fmt.Sprintf(" (%s spent on earlier failures)", b.used.Round(time.Millisecond))
			}
			if b.Clock != nil {
				b.Clock.Decline("collector "+c.name+" ("+c.scope+")", e.Error)
			}
			m.Add(e)
			out = append(out, e)
			if slot != nil {
				slot.entry = e
				close(slot.done)
			}
			continue
		}
		e = runCollector(ctx, c, e, bound, a, limits, now)
		m.Add(e)
		out = append(out, e)
		if slot != nil {
			slot.entry = e
			close(slot.done)
		}
	}
	return out
}

// runCollector runs collector c, begun as e, within its time bound and returns e with what it
// wrote, how long it took and its status: truncated when it ran out of time or hit a limit,
// failed on its error, else complete.
func runCollector(ctx context.Context, c collector, e Entry, bound time.Duration, a *Artifacts, limits Limits, now func() time.Time) Entry {
	cctx, ccancel := context.WithTimeout(ctx, bound)
	w := &work{a: a, limits: limits}
	err := c.run(cctx, w)
	timedOut := cctx.Err() != nil
	ccancel()
	e.Duration = secondsSince(now(), e.Start)
	e.Paths, e.Bytes, e.Items, e.Notes = w.paths, w.bytes, w.items, w.notes
	switch {
	case timedOut:
		e.Status = Truncated
		e.Error = fmt.Sprintf("stopped at its time bound of %s", bound.Round(time.Millisecond))
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			e.Error += ": " + err.Error()
		}
	case err != nil:
		e.Status, e.Error = Failed, err.Error()
	case len(w.truncated) > 0:
		e.Status, e.Error = Truncated, w.truncated[0]
		if len(w.truncated) > 1 {
			e.Error += fmt.Sprintf(" (and %d more)", len(w.truncated)-1)
		}
	default:
		e.Status = Complete
	}
	return e
}
