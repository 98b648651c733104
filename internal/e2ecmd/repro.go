package e2ecmd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/report"
)

// cmdRepro reruns the lane of a downloaded run with its exact pins: the lane file as the run
// used it (inside the artifacts), the same E2E_* choices (faults), the platform at the digest
// the run verified (substrate/platform.json), the same run id, into a fresh artifacts folder.
// It never reuses a kept cluster unless the person sets E2E_REUSE=1 now.
func cmdRepro(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("e2e repro", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("artifacts", "", "artifacts folder of the run to reproduce")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	data, err := os.ReadFile(filepath.Join(*dir, "repro.json"))
	if err != nil {
		fmt.Fprintf(stderr, "e2e repro: %s holds no repro.json (is it the artifacts folder of a run?): %v\n", *dir, err)
		return exitConfig
	}
	var r report.Repro
	if err := json.Unmarshal(data, &r); err != nil {
		fmt.Fprintf(stderr, "e2e repro: %s/repro.json: %v\n", *dir, err)
		return exitConfig
	}
	laneFile := filepath.Join(*dir, filepath.FromSlash(r.LaneFile))
	if _, err := os.Stat(laneFile); err != nil {
		fmt.Fprintf(stderr, "e2e repro: %s lacks the lane file the run used: %v\n", *dir, err)
		return exitConfig
	}
	rec, err := install.ReadPlatformRecord(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "e2e repro: %s/%s: %v\n", *dir, install.PlatformRecordFile, err)
		return exitConfig
	}
	env, notes, err := reproEnvironment(r.Env, rec, os.Getenv, gitCommit)
	for _, n := range notes {
		fmt.Fprintf(stdout, "e2e repro: %s\n", n)
	}
	if err != nil {
		fmt.Fprintf(stderr, "e2e repro: %v\n", err)
		return exitConfig
	}
	for k, v := range env {
		os.Setenv(k, v)
	}
	if r.RunID != "" && os.Getenv("E2E_RUN_ID") == "" {
		os.Setenv("E2E_RUN_ID", r.RunID)
	}
	fmt.Fprintf(stdout, "e2e repro: rerunning lane %s from %s (run %s at commit %s, env %v)\n",
		r.Lane, laneFile, r.RunID, orUnknown(r.Commit), env)
	if head, err := gitOutput(".", "rev-parse", "HEAD"); err == nil && r.Commit != "" && head != r.Commit {
		fmt.Fprintf(stdout, "e2e repro: this checkout is at %s; `git checkout --detach %s` reproduces the harness too\n", head, r.Commit)
	}
	return cmdRun(ctx, []string{"--lane", laneFile}, stdout, stderr)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
