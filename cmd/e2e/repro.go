package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// cmdRepro reruns the lane of a downloaded run with its exact pins: the lane file copied into
// the artifacts, the same faults, a fresh artifacts folder.
func cmdRepro(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("e2e repro", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("artifacts", "", "artifacts folder of the run to reproduce")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	info, err := readRunInfo(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "e2e repro: %s holds no readable run.json (is it the artifacts folder of a run?): %v\n", *dir, err)
		return exitConfig
	}
	laneFile := filepath.Join(*dir, "lane", info.Lane+".yaml")
	if _, err := os.Stat(laneFile); err != nil {
		fmt.Fprintf(stderr, "e2e repro: %s lacks the lane the run used: %v\n", *dir, err)
		return exitConfig
	}
	if info.Faults != "" {
		os.Setenv("E2E_SIM_FAULT", info.Faults)
	}
	fmt.Fprintf(stdout, "e2e repro: rerunning lane %s from %s (run %s at commit %s, faults %q)\n",
		info.Lane, laneFile, info.RunID, orUnknown(info.Commit), info.Faults)
	if head, err := gitOutput(".", "rev-parse", "HEAD"); err == nil && info.Commit != "" && head != info.Commit {
		fmt.Fprintf(stdout, "e2e repro: note: this checkout is at %s; `git checkout %s` reproduces the harness too\n", head, info.Commit)
	}
	return cmdRun(ctx, []string{"--lane", laneFile}, stdout, stderr)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
