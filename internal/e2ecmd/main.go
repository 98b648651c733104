// Package e2ecmd is the e2e command's orchestrator: it reads a lane (framework/lane), brings up
// its substrate (internal/substrate), runs the lane's suites as child processes, judges the
// verdict (framework/verdict, internal/report) and tears down or keeps what the run made; it
// also reruns a downloaded run (repro) and tears down a kept one (down). cmd/e2e's main only
// calls Main.
package e2ecmd

import (
	"context"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Exit codes, documented in docs/artifacts.md ("Exit codes").
const (
	exitPass        = 0
	exitFail        = 1
	exitConfig      = 2
	exitSoft        = 3
	exitInterrupted = 130
)

// Main runs the e2e command with args (the command line without the program's name) and returns
// its exit code; cmd/e2e documents the commands, the exit codes and the environment.
func Main(args []string, stdout, stderr io.Writer) int {
	// controller-runtime's own log (certificate watchers, client caches) says nothing a run's
	// reader needs; the sim's controllers log through the logger their manager is given. Set
	// explicitly, so controller-runtime does not print a stack trace to stderr after 30 s.
	ctrllog.SetLogger(logr.Discard())
	return dispatch(context.Background(), args, stdout, stderr)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: e2e run --lane <lane> | e2e repro --artifacts <dir> | e2e down --lane <lane>")
		return exitConfig
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr)
	case "repro":
		return cmdRepro(ctx, args[1:], stdout, stderr)
	case "down":
		return cmdDown(args[1:], stdout, stderr)
	case "substrate":
		return cmdSubstrate(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "e2e: unknown command %q (run, repro, down, substrate)\n", args[0])
	return exitConfig
}
