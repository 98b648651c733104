// Command e2e runs a lane end to end and reports its verdict.
//
//	e2e run --lane <name|file> [--lanes-dir lanes]   bring up, run the lane's suites, judge, tear down
//	e2e repro --artifacts <dir>                      rerun the lane of a downloaded run with its pins
//	e2e down --lane <name|file> [--work <dir>]       tear down what a kept run left (kind)
//	e2e substrate --lane <name|file>                 print the loaded lane's substrate (make e2e)
//
// Exit codes: 0 pass, 1 hard failure, 2 configuration or preflight error, 3 soft failure only,
// 130 interrupted.
//
// Environment: every variable in knobs.go (docs/knobs.md), checked before anything starts.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

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

func main() {
	// controller-runtime's own log (certificate watchers, client caches) says nothing a run's
	// reader needs; the sim's controllers log through the logger their manager is given. Set
	// explicitly, so controller-runtime does not print a stack trace to stderr after 30 s.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(dispatch(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
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
