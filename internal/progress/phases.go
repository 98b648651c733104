package progress

import (
	"fmt"
	"slices"
	"time"
)

// Phases may overlap: the pools phase starts with the first conformance cluster up, while the
// tenant phase still waits for the others. The console follows every phase that runs, each
// with its live line until it ends; a detail outside any pool belongs to the phase it names,
// or else to the oldest phase running (the one that was waiting before the others started).

// running is the phase named name among those running, the oldest when name is "", or nil.
func (c *Console) running(name string) *unit {
	for _, u := range c.phases {
		if name == "" || u.name == name {
			return u
		}
	}
	return nil
}

func (c *Console) phaseStart(ev Event) {
	u := &unit{name: ev.Phase, since: ev.At, first: ev.At, lastLine: ev.At, ceiling: ev.Ceiling}
	c.phases = append(c.phases, u)
	c.logLine(ev.At, true, fmt.Sprintf("phase %s started (ceiling %s)", ev.Phase, ev.Ceiling))
	c.addBar(u)
}

func (c *Console) phaseEnd(ev Event) {
	if u := c.running(ev.Phase); u != nil && ev.Phase != "" {
		u.over = true
		c.dropBar(u)
		c.phases = slices.DeleteFunc(c.phases, func(p *unit) bool { return p == u })
	}
	// A lifecycle spec ends with its phase.
	for _, u := range c.pools {
		if u.lifecycle && !u.over {
			c.flushPass(u.name, false, time.Time{})
			u.over, u.lifecycle = true, false
			c.dropBar(u)
		}
	}
	line := fmt.Sprintf("phase %s %s", ev.Phase, ev.Outcome)
	switch ev.Outcome {
	case "skipped", "declined":
	default:
		line += " in " + secs(ev.At.Sub(ev.Since))
		if ev.Ceiling > 0 {
			line += fmt.Sprintf(" (of %s)", ev.Ceiling)
		}
	}
	if ev.Detail != "" {
		line += ": " + clip(ev.Detail, 240)
	}
	c.permanent(ev.At, line)
}

// phaseOf is the phase a detail outside any pool belongs to in the suite's events: the oldest
// phase running, or else the last one started.
func (e *Emitter) phaseOf() string {
	if len(e.running) > 0 {
		return e.running[0]
	}
	return e.last
}
