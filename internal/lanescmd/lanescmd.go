// Package lanescmd is the lanes command (cmd/lanes): it checks the lane files, generates the
// e2e workflows from them and prints a lane's plan.
package lanescmd

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/install/catalog"
	"github.com/cozystack/cozy-e2e/internal/laneplan"
	"github.com/cozystack/cozy-e2e/internal/registry"
	"github.com/cozystack/cozy-e2e/internal/workflows"
)

// Main runs the lanes command on the process's arguments and exits with its code: 0 ok, 2 a
// lane or the workflow is wrong (configuration error).
func Main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: lanes check | workflow write|check | plan --lane <name>")
		return 2
	}
	fs := flag.NewFlagSet("lanes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "lanes", "folder holding the lane files")
	out := fs.String("out", workflows.WorkflowPath, "the generated workflow")
	name := fs.String("lane", "", "lane name or file (plan)")
	cmd, rest := args[0], args[1:]
	sub := ""
	if cmd == "workflow" && len(rest) > 0 {
		sub, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	switch cmd {
	case "check":
		return check(*dir, stdout, stderr)
	case "workflow":
		return workflow(sub, *dir, *out, stdout, stderr)
	case "plan":
		l, err := lane.Find(*dir, *name)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if l.Deprecation != "" {
			fmt.Fprintln(stderr, l.Deprecation)
		}
		sections := append(catalog.PlanSections(l), registry.PlanSections(l)...)
		sections = append(sections, install.StoragePlanSection())
		laneplan.Write(stdout, l, sections...)
		return 0
	}
	fmt.Fprintf(stderr, "lanes: unknown command %q (check, workflow, plan)\n", cmd)
	return 2
}

// dirs is the lanes folder and, for the default one, the example suites' lanes beside it.
func dirs(dir string) []string {
	out := []string{dir}
	if ex, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), lane.ExampleLanes)); len(ex) > 0 {
		out = append(out, ex...)
	}
	return out
}

func check(dir string, stdout, stderr io.Writer) int {
	lanes, err := lane.LoadDirs(dirs(dir))
	for _, l := range lanes {
		if cerr := registry.Check(l); cerr != nil {
			err = errors.Join(err, cerr)
			continue
		}
		a := l.Budget.Arithmetic()
		if line := registry.PerPoolLine(l); line != "" {
			fmt.Fprintf(stdout, "%-22s ok  %s\n", l.Name, line)
		} else {
			fmt.Fprintf(stdout, "%-22s ok  phases %s + diagnostics %s + artifacts %s + margin %s = %s of jobCap %s (headroom %s)\n",
				l.Name, a.Phases, a.Diagnostics, a.Artifacts, a.Margin, a.Total, a.Cap, a.Headroom)
		}
		if line := registry.WorkersLine(l); line != "" {
			fmt.Fprintf(stdout, "%-22s     workers: %s\n", "", line)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "lanes check: refused:\n%v\n", err)
		return 2
	}
	return 0
}

func workflow(sub, dir, out string, stdout, stderr io.Writer) int {
	lanes, err := lane.LoadDirs(dirs(dir))
	if err != nil {
		fmt.Fprintf(stderr, "lanes workflow: the lanes do not load:\n%v\n", err)
		return 2
	}
	all, err := workflows.Workflows(lanes)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	// --out names the e2e workflow; the reusable one lives beside it.
	files := []struct {
		path string
		want []byte
	}{
		{out, all[workflows.WorkflowPath]},
		{filepath.Join(filepath.Dir(out), filepath.Base(workflows.ReusableWorkflowPath)), all[workflows.ReusableWorkflowPath]},
	}
	switch sub {
	case "write":
		for _, f := range files {
			if err := os.WriteFile(f.path, f.want, 0o644); err != nil {
				fmt.Fprintln(stderr, err)
				return 2
			}
			fmt.Fprintf(stdout, "wrote %s\n", f.path)
		}
		return 0
	case "check":
		code := 0
		for _, f := range files {
			have, err := os.ReadFile(f.path)
			if err != nil || !bytes.Equal(have, f.want) {
				fmt.Fprintf(stderr, "%s is out of date with %s/*.yaml (job caps or lanes changed); run `make workflows` and commit it\n", f.path, dir)
				if err == nil {
					fmt.Fprint(stderr, lane.Diff(string(have), string(f.want)))
				}
				code = 2
				continue
			}
			fmt.Fprintf(stdout, "%s matches %s/*.yaml\n", f.path, dir)
		}
		// The CI workflow is written by hand; it must run every sim lane.
		ci := filepath.Join(filepath.Dir(dir), filepath.FromSlash(workflows.CIPath))
		data, err := os.ReadFile(ci)
		if err == nil {
			err = workflows.CheckCI(data, lanes, filepath.Dir(dir))
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		fmt.Fprintf(stdout, "%s runs every sim lane\n", workflows.CIPath)
		return code
	}
	fmt.Fprintf(stderr, "lanes workflow: want write or check, got %q\n", sub)
	return 2
}
