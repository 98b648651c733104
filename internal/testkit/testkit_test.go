package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// fatalT is a test whose Fatalf records the message and ends the goroutine, as testing.T does.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper()                        {}
func (f *fatalT) Logf(string, ...any)            {}
func (f *fatalT) Fatalf(format string, a ...any) { f.msg = fmt.Sprintf(format, a...); panic(f) }

// failure runs the wait and is the message it ended the test with, "" if it did not.
func failure(t *testing.T, wait func(testing.TB)) (msg string) {
	f := &fatalT{TB: t}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
		msg = f.msg
	}()
	wait(f)
	return ""
}

// A wait that gives up says what it waited for, how long, where it was stuck and the evidence.
func TestEventuallySaysWhatHowLongAndWhere(t *testing.T) {
	msg := failure(t, func(tb testing.TB) {
		testkit.Eventually(t.Context(), tb, "the answer", 50*time.Millisecond,
			testkit.Err(func() error { return errors.New("still 41") }), func() string { return "the log's end" })
	})
	for _, want := range []string{"waiting for the answer: not within 50ms", "last: still 41", "\nthe log's end"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

// The reason kept is the one seen before the context ended, not the end's own error.
func TestEventuallyKeepsTheReasonSeenBeforeTheContextEnded(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	msg := failure(t, func(tb testing.TB) {
		testkit.Eventually(ctx, tb, "the pod", time.Minute, testkit.Err(func() error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errors.New("pending")
		}))
	})
	if !strings.Contains(msg, "the test's context ended") || !strings.Contains(msg, "last: pending") {
		t.Errorf("message %q", msg)
	}
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	if msg := failure(t, func(tb testing.TB) {
		testkit.Eventually(t.Context(), tb, "three looks", time.Minute, testkit.Holds(func() bool { n++; return n == 3 }))
	}); msg != "" || n != 3 {
		t.Errorf("%d looks, message %q", n, msg)
	}
}

func TestTail(t *testing.T) {
	if got := testkit.Tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("%q", got)
	}
}

// Without a deadline, Left is long enough to wait on and short enough to add to now.
func TestLeftWithoutADeadline(t *testing.T) {
	if d := testkit.Left(context.Background()); d < 24*time.Hour || time.Now().Add(d).Before(time.Now()) {
		t.Errorf("Left %s", d)
	}
}
