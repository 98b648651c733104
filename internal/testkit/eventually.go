package testkit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The pauses between two looks of Eventually: the first is short for the quick waits of unit
// tests, each next one twice the last up to the longest, for the waits on real processes.
const (
	firstPause   = 10 * time.Millisecond
	longestPause = 250 * time.Millisecond
)

// sayAfter is how long a wait lasts before its end is worth a line in the test's log.
const sayAfter = time.Second

// progressEvery is how often a long wait says in the test's log how long it has left and where
// it is stuck.
const progressEvery = 30 * time.Second

// Eventually looks at cond until it holds, for at most timeout and not after ctx ends. cond says
// whether it holds and, when not, why: the reason is where the wait is stuck. A wait that lasts
// says in the test's log when it ended (after sayAfter) and, every progressEvery before, what it
// waits for, how long it has left and the last reason. One that gives up ends the test saying
// what it waited for, how long, the last reason seen before ctx ended, and what each evidence
// returns then (the end of a log, what a recorder heard).
func Eventually(ctx context.Context, t testing.TB, what string, timeout time.Duration, cond func() (bool, string), evidence ...func() string) {
	t.Helper()
	start := time.Now()
	end := start.Add(timeout)
	d, ctxFirst := ctx.Deadline()
	if ctxFirst = ctxFirst && d.Before(end); ctxFirst {
		end = d
	}
	var last string
	said := start
	for pause := firstPause; ; pause = min(2*pause, longestPause) {
		ok, reason := cond()
		if ok {
			if time.Since(start) >= sayAfter {
				t.Logf("%s after %s", what, since(start))
			}
			return
		}
		if ctx.Err() == nil || last == "" {
			last = reason // what it saw before ctx ended, not the end's own error
		}
		now := time.Now()
		if ctx.Err() != nil || !now.Before(end) {
			t.Fatalf("waiting for %s: %s; last: %s%s", what, gaveUp(ctx, ctxFirst, start, timeout), last, seen(evidence))
		}
		if now.Sub(said) >= progressEvery {
			t.Logf("waiting for %s: %s so far, %s left; last: %s", what, since(start), end.Sub(now).Round(time.Second), last)
			said = now
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(pause, end.Sub(now))):
		}
	}
}

// Err is the condition that check returns no error; the error is the reason it does not hold.
func Err(check func() error) func() (bool, string) {
	return func() (bool, string) {
		if err := check(); err != nil {
			return false, err.Error()
		}
		return true, ""
	}
}

// Holds is the condition that check returns true; it has no reason but that it does not hold yet.
func Holds(check func() bool) func() (bool, string) {
	return func() (bool, string) { return check(), "not yet" }
}

// Left is how long ctx has before its deadline; a century, as good as forever, for a context
// without one.
func Left(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return 100 * 365 * 24 * time.Hour
}

// gaveUp says why and when a wait of timeout begun at start gave up: ctx ended, or was at its
// deadline (ctxFirst, the deadline before the timeout's), or the timeout passed.
func gaveUp(ctx context.Context, ctxFirst bool, start time.Time, timeout time.Duration) string {
	if ctx.Err() != nil || ctxFirst {
		return fmt.Sprintf("the test's context ended after %s of %s", since(start), timeout)
	}
	return fmt.Sprintf("not within %s (waited %s)", timeout, since(start))
}

// seen is what each evidence returns, a paragraph each, after a line break.
func seen(evidence []func() string) string {
	var b strings.Builder
	for _, e := range evidence {
		b.WriteString("\n")
		b.WriteString(e())
	}
	return b.String()
}

// since is the time since start, rounded to a readable precision.
func since(start time.Time) time.Duration {
	d := time.Since(start)
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
