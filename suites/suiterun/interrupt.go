package suiterun

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// The orchestrator interrupts a suite with SIGINT (its own Ctrl-C, SIGINT or SIGTERM) and kills
// it when it has not ended within its grace; Ginkgo, on the same signal, cancels the running
// node's context and then runs the cleanup nodes. What the suite started outside any node (the
// joins of the pools phase) and what it would run in those cleanup nodes for evidence (cluster
// trees, on-failure collectors) is the suite's to stop: Interrupted says when.

// watchInterrupt starts listening for the signals that interrupt the suite.
func (s *Suite) watchInterrupt() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	s.interruptOn(ch)
}

// interruptOn ends s's interrupt context at the first signal on ch and says, in one line, what
// the suite gives up.
func (s *Suite) interruptOn(ch <-chan os.Signal) {
	ctx, cancel := context.WithCancelCause(context.Background())
	s.interrupt = ctx
	go func() {
		err := fmt.Errorf("interrupted by %s", signalName(<-ch))
		fmt.Fprintf(s.Log, "suite %s: %v: the joins stop now; no cluster tree and no on-failure collectors from here (declined in manifest.json), only the teardown\n",
			s.Name, err)
		cancel(err)
	}()
}

// Interrupted is the signal that interrupted the suite, or nil.
func (s *Suite) Interrupted() error {
	if s.interrupt == nil || s.interrupt.Err() == nil {
		return nil
	}
	return context.Cause(s.interrupt)
}

// OnInterrupt calls f, with the interrupt, as soon as the suite is interrupted (at once when
// it was already).
func (s *Suite) OnInterrupt(f func(error)) {
	if s.interrupt == nil {
		return
	}
	context.AfterFunc(s.interrupt, func() { f(context.Cause(s.interrupt)) })
}

func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}
