package verdict

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// carrier is a Judged error, as a detector, a wait or the budget returns one.
type carrier struct{ j Judgement }

func (c *carrier) Error() string        { return "stuck: " + string(c.j.Class) }
func (c *carrier) Judgement() Judgement { return c.j }

// Every class docs/signals.md names, and every class the verdict knows, comes out of Judge as
// the detector decided it, wrapped or not, with its stage, evidence and time; and Judge decides
// the same whatever way the spec then ended, but for a signal.
func TestJudgeKeepsEveryClassOfDocsSignals(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "signals.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[Class]bool{}
	for _, m := range regexp.MustCompile("`([a-z][a-z-]*)`").FindAllStringSubmatch(string(doc), -1) {
		if c := Class(m[1]); c.Known() {
			named[c] = true
		}
	}
	if len(named) < 12 {
		t.Fatalf("docs/signals.md names %d known classes; its tables name at least twelve", len(named))
	}
	for _, c := range Classes() {
		named[c] = true
	}
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for c := range named {
		want := Judgement{Class: c, Stage: "join", Evidence: []string{"pools/md0/events.jsonl"}, At: at}
		for _, ended := range []Ending{SpecFailed, SpecPanicked, SpecTimedOut, SpecAborted} {
			err := fmt.Errorf("pool md0: %w", &carrier{want})
			got := Judge(Cause{Err: err, Ended: ended, Phase: "pools", PhaseRanOut: at.Add(time.Minute)})
			if got.Class != c || got.Stage != "join" || len(got.Evidence) != 1 || !got.At.Equal(at) {
				t.Errorf("%s ended %s: judged %+v, want %+v", c, ended, got, want)
			}
		}
		if got := Judge(Cause{Err: &carrier{want}, Ended: SpecInterrupted}); got.Class != Deadline || got.Stage != "spec interrupted" {
			t.Errorf("%s, then a signal: judged %+v, want a deadline at spec interrupted", c, got)
		}
	}
}

// Without a noted error, how the spec ended and its phase decide.
func TestJudgeWithoutANotedError(t *testing.T) {
	ranOut := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		c     Cause
		class Class
		stage string
		at    time.Time
	}{
		{"plain assertion", Cause{Ended: SpecFailed, Phase: "pools"}, ProductAssertion, "", time.Time{}},
		{"assertion after the phase ran out", Cause{Ended: SpecFailed, Phase: "pools", PhaseRanOut: ranOut}, Deadline, "pools", ranOut},
		{"panic", Cause{Ended: SpecPanicked, PhaseRanOut: ranOut}, Harness, "", time.Time{}},
		{"timed out", Cause{Ended: SpecTimedOut}, Deadline, "spec timedout", time.Time{}},
		{"aborted", Cause{Ended: SpecAborted}, Deadline, "spec aborted", time.Time{}},
		{"interrupted", Cause{Ended: SpecInterrupted}, Deadline, "spec interrupted", time.Time{}},
		{"an error that carries nothing", Cause{Err: errors.New("Node w1 has no label"), Ended: SpecFailed, PhaseRanOut: ranOut}, ProductAssertion, "", time.Time{}},
	} {
		got := Judge(tc.c)
		if got.Class != tc.class || got.Stage != tc.stage || !got.At.Equal(tc.at) {
			t.Errorf("%s: judged %+v, want %s %q at %v", tc.name, got, tc.class, tc.stage, tc.at)
		}
	}
}
