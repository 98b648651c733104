// Package testkit is the one kit of the module's tests: Must for an error that ends a test,
// Eventually for every wait (it says what it waits for, how long it has left and where it is
// stuck), Unavailable for what a test needs and the host lacks, Main for a TestMain that keeps
// controller-runtime quiet, a Buffer that a writer and the test share, LogWriter into the test's
// log, Context with a deadline, Ptr and Tail. Every test package uses it instead of copies of its
// own; it imports nothing of the module, so a package's in-package tests can use it too.
// Environments that start a real apiserver live beside it: internal/testkit/tenantenv,
// internal/controlplane/cptest and internal/sim/simtest.
package testkit

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Must ends the test at once if err is not nil.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Context is a context that ends after d or when the test ends, whichever comes first.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Ptr is a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Buffer is a bytes.Buffer that a writer of another goroutine and the test may share.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is all that was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// LogWriter writes into t's log, a line a Write.
func LogWriter(t testing.TB) io.Writer { return logWriter{t} }

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Unavailable says that what the test needs (a built tool, root, a host's piece) is missing:
// under CI (CI set), where everything is installed, that fails the test; elsewhere it skips it.
func Unavailable(t testing.TB, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(args...)
	}
	t.Skip(args...)
}
