package verdict

import (
	"errors"
	"time"
)

// Judgement is a failure's class, the stage it names, its evidence and when it was decided
// (zero: unknown).
type Judgement struct {
	Class    Class
	Stage    string
	Evidence []string
	At       time.Time
}

// Judged is an error that carries what a detector, a wait or the budget found: a join's or a
// lifecycle spec's stage error, a tenant wait's error, an exhausted budget, a phase's time
// running out, a lane that cannot run a spec. Judge reads it; nothing else turns it into a class.
type Judged interface {
	error
	Judgement() Judgement
}

// Carried is the judgement err carries (it or an error it wraps is Judged), and whether it
// carries one.
func Carried(err error) (Judgement, bool) {
	var j Judged
	if errors.As(err, &j) {
		return j.Judgement(), true
	}
	return Judgement{}, false
}

// Ending is how a failed spec ended, as the test runner reports it: the values are Ginkgo's
// own names of its failure states (github.com/onsi/ginkgo/v2 v2.34.0 types/types.go:772-775),
// which suites/suiterun passes on as they are.
type Ending string

// The endings Judge tells apart; any other is SpecFailed.
const (
	SpecFailed      Ending = "failed"
	SpecInterrupted Ending = "interrupted"
	SpecPanicked    Ending = "panicked"
	SpecTimedOut    Ending = "timedout"
	SpecAborted     Ending = "aborted"
)

// Cause is everything a failure is judged from.
type Cause struct {
	// Err is the error the spec noted as its failure's cause; nil when it noted none.
	Err error
	// Ended is how the spec ended.
	Ended Ending
	// Phase is the lane phase the spec's steps ran in, and PhaseRanOut when its deadline
	// passed before the spec failed (zero: it had not, or the spec ran in no phase).
	Phase       string
	PhaseRanOut time.Time
}

// Judge is the one place a failure's class is decided. A signal ends a spec as a deadline,
// whatever it noted on its way out. A noted error is judged by what it carries (Carried), and
// one that carries nothing is a product assertion. Without a noted error: a panic is the
// harness's; a spec the runner timed out or aborted is a deadline; an assertion on a read that
// the phase's deadline cut short says nothing about the product, and is a deadline at that
// phase; anything else is a product assertion.
func Judge(c Cause) Judgement {
	switch {
	case c.Ended == SpecInterrupted:
		return Judgement{Class: Deadline, Stage: "spec " + string(c.Ended)}
	case c.Err != nil:
		if j, ok := Carried(c.Err); ok {
			return j
		}
		return Judgement{Class: ProductAssertion}
	case c.Ended == SpecPanicked:
		return Judgement{Class: Harness}
	case c.Ended == SpecTimedOut || c.Ended == SpecAborted:
		return Judgement{Class: Deadline, Stage: "spec " + string(c.Ended)}
	case !c.PhaseRanOut.IsZero():
		return Judgement{Class: Deadline, Stage: c.Phase, At: c.PhaseRanOut}
	}
	return Judgement{Class: ProductAssertion}
}
