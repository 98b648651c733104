// Command scalebench is the sim lane's scaling benchmark (make scale-bench): it runs the sim lane
// with md0 at 1, 8, 32 and 64 workers and with 4 and 16 one-worker pools, one run at a time, and
// says per run the wall time, the CPU seconds of the whole process tree, its peak memory, the
// harness's own CPU (the suite process, apart from the orchestrator with its in-process
// controllers and from every other process of the sim), the harness's requests to the management
// apiserver per worker (from the apiserver's audit log), and each join stage's median and
// maximum over the scaled pools. It writes results.json and results.md (ratios to the 1-worker
// run) into its output folder. A benchmark, not a test: it judges nothing.
//
//	go run ./hack/scalebench [-scale 1,8,32,64,4p,16p] [-out dir]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

func main() {
	scale := flag.String("scale", envOr("SCALE", DefaultScale), "runs: N is md0 at N workers, Np is N one-worker pools (the 1-worker run always runs, first)")
	out := flag.String("out", "", "output folder (default _artifacts/scale-bench-<UTC time>)")
	e2e := flag.String("e2e", "bin/e2e", "the bin/e2e to run (built here from ./cmd/e2e)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *scale, *out, *e2e); err != nil {
		fmt.Fprintln(os.Stderr, "scale-bench:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, scale, out, e2e string) error {
	scenarios, err := ParseScale(scale)
	if err != nil {
		return err
	}
	base, err := os.ReadFile(filepath.Join("lanes", "sim.yaml"))
	if err != nil {
		return fmt.Errorf("run it from the repository's root (make scale-bench): %w", err)
	}
	if out == "" {
		out = filepath.Join("_artifacts", "scale-bench-"+time.Now().UTC().Format("20060102T150405Z"))
	}
	// The suites run in their own folders: every path they are given is absolute.
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	lanes := filepath.Join(out, "lanes")
	if err := os.MkdirAll(lanes, 0o755); err != nil {
		return err
	}
	for _, s := range scenarios {
		path, err := WriteLane(base, lanes, s)
		if err != nil {
			return err
		}
		if _, err := lane.Load(path); err != nil {
			return fmt.Errorf("the generated lane of %s: %w", s.Label(), err)
		}
	}
	// The binaries are built once, before any run, so no run's wall time holds a build.
	l, err := lane.Load(filepath.Join(lanes, scenarios[0].Name()+".yaml"))
	if err != nil {
		return err
	}
	if err := build(ctx, e2e, l); err != nil {
		return err
	}
	var results []Result
	for i, s := range scenarios {
		fmt.Printf("scale-bench: run %d of %d: %s (load %s)\n", i+1, len(scenarios), s.Label(), loadavg())
		r, err := runOne(ctx, e2e, lanes, filepath.Join(out, s.Name()), s)
		if err != nil {
			return err
		}
		results = append(results, r)
		fmt.Println(r.Line())
		if err := writeReport(out, results); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "results.md"))
	fmt.Printf("\n%s\nscale-bench: %s and %s\n", md, filepath.Join(out, "results.json"), filepath.Join(out, "results.md"))
	return nil
}

func build(ctx context.Context, e2e string, l *lane.Lane) error {
	cmds := [][]string{{"go", "build", "-o", e2e, "./cmd/e2e"}}
	for _, s := range l.Suites {
		cmds = append(cmds, []string{"go", "test", "-c", "-o", filepath.Join("bin", "suites", s.Name+".test"), "./suites/" + s.Name})
	}
	for _, c := range cmds {
		cmd := exec.CommandContext(ctx, c[0], c[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(c, " "), err)
		}
	}
	return nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
