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
// Environment: every variable in internal/e2ecmd/knobs.go (docs/knobs.md), checked before
// anything starts.
//
// The command is internal/e2ecmd; this main only calls it.
package main

import (
	"os"

	"github.com/cozystack/cozy-e2e/internal/e2ecmd"
)

func main() {
	os.Exit(e2ecmd.Main(os.Args[1:], os.Stdout, os.Stderr))
}
