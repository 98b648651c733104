package join

import (
	"fmt"
	"time"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// course is where a pool's join stands, look after look: its current stage and since when,
// the furthest stage it stood at and since when, and how often it fell back from there. A pool
// can fall back (a MachineHealthCheck replaces Machines stuck at an import; the replacements
// start over): the deadline then names the stage the pool could not pass, not the one its
// newest Machines happen to be at.
type course struct {
	cur, furthest Progress
	fallbacks     int
	suspects      suspects
	// end is when the join's budget runs out (zero: it has none).
	end time.Time
}

func newCourse(pool string, start, end time.Time) *course {
	cur := Progress{Pool: pool, Since: start}
	return &course{cur: cur, furthest: cur, end: end}
}

// look takes one evaluation of the pool, made at now, and reports whether its stage or detail
// changed (observe takes its suspects). A look made once the budget ran out is not where the pool stood within it: the
// join's loop may look once more after its deadline passed (the deadline and a change arrive
// together, and select picks either), and the pool may have moved on by then; counted, it made
// a pool that stood at disk-import for three minutes "stuck at vmi-running for 0s".
func (c *course) look(stage Stage, detail string, now time.Time) bool {
	if c.cur.Stage != "" && !c.end.IsZero() && !now.Before(c.end) {
		return false // the first look stands, for a join begun after its budget ran out
	}
	if stage == c.cur.Stage && detail == c.cur.Detail {
		return false
	}
	prev := c.cur.Stage
	if stage != c.cur.Stage {
		c.cur.Since = now
	}
	c.cur.Stage, c.cur.Detail = stage, detail
	switch {
	case c.cur.Stage.Index() > c.furthest.Stage.Index():
		c.furthest = c.cur
	case c.cur.Stage == c.furthest.Stage:
		c.furthest.Detail = c.cur.Detail
	case c.cur.Stage != prev && prev == c.furthest.Stage:
		c.fallbacks++
	}
	return true
}

// deadline is the error of a join whose budget ran out, judged at now or at the end of the
// budget, whichever came first. It names the furthest stage the pool stood at and how long it
// had stood there: the stage it could not pass. When the pool fell back from there, it says
// where to and how often.
func (c *course) deadline(budget time.Duration, now time.Time) *StageError {
	if !c.end.IsZero() && now.After(c.end) {
		now = c.end
	}
	const why = "its Machines were deleted or replaced: the pool's events say by whom"
	cur, furthest := c.cur, c.furthest
	e := &StageError{Pool: cur.Pool, Stage: furthest.Stage, Class: verdict.Deadline, Detail: cur.Detail,
		Elapsed: now.Sub(furthest.Since), Budget: budget, At: now, Suspects: c.suspects.list()}
	switch {
	case furthest.Stage.Index() > cur.Stage.Index():
		e.Detail = fmt.Sprintf("%s; the pool fell back to %s %s ago (%s): %s",
			furthest.Detail, cur.Stage, since(now.Sub(cur.Since)), why, cur.Detail)
	case c.fallbacks > 0:
		e.Detail = fmt.Sprintf("%s (the pool fell back from %s %d time(s) and reached it again %s ago; %s)",
			cur.Detail, cur.Stage, c.fallbacks, since(now.Sub(cur.Since)), why)
	}
	return e
}

// observe takes the suspects of one evaluation made at now: it reports which appeared and
// which upstream cleared, and keeps the current list in the pool's progress. A look made once
// the budget ran out changes nothing, as in look.
func (c *course) observe(found []Suspect, now time.Time) (appeared, cleared []Suspect) {
	if c.cur.Stage != "" && !c.end.IsZero() && !now.Before(c.end) {
		return nil, nil
	}
	appeared, cleared = c.suspects.look(found, now)
	c.cur.Suspects = c.suspects.list()
	return appeared, cleared
}
