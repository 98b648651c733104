package docs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/report"
)

const (
	readmeMax   = 200
	firstScreen = 40
)

// README.md is short, and its first screen holds what a newcomer needs: what the harness
// proves, the two commands and what they need, where the reports are, how to reproduce a red
// CI run and how to run a real lane; below it, what has run for real and every docs/ page.
func TestREADMEIsAFirstScreenAndAnIndex(t *testing.T) {
	text := read(t, "README.md")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > readmeMax {
		t.Errorf("README.md has %d lines, over %d: move reference to a docs/ page and link it", len(lines), readmeMax)
	}
	screen := strings.Join(lines[:min(firstScreen, len(lines))], "\n")
	for _, want := range []string{"make e2e", "make test", "Go 1.26", "make tools", "docs/performance.md",
		"report.html", "summary.md", "make repro ARTIFACTS=", "make e2e LANE=kubernetes"} {
		if !strings.Contains(screen, want) {
			t.Errorf("README.md's first %d lines do not mention %q", firstScreen, want)
		}
	}
	if !strings.Contains(text, "\n## What has run for real\n") {
		t.Error(`README.md has no section "What has run for real"`)
	}
	for _, page := range pages(t)[1:] {
		if !strings.Contains(text, "]("+page+")") {
			t.Errorf("README.md does not link %s", page)
		}
	}
}

// firstScreenCommands returns the commands in the sh blocks of README's first screen, comments
// left out.
func firstScreenCommands(t *testing.T) []string {
	t.Helper()
	lines := strings.Split(read(t, "README.md"), "\n")
	var cmds []string
	in := false
	for i, l := range lines {
		switch {
		case !in && strings.HasPrefix(l, "```sh"):
			if i >= firstScreen {
				return cmds
			}
			in = true
		case in && strings.HasPrefix(l, "```"):
			if i >= firstScreen {
				t.Errorf("README.md:%d: an sh block of the first screen ends past line %d", i+1, firstScreen)
			}
			in = false
		case in:
			cmd, _, _ := strings.Cut(l, "#")
			if cmd = strings.TrimSpace(cmd); cmd != "" {
				cmds = append(cmds, cmd)
			}
		}
	}
	return cmds
}

// Every command of README's first screen works as written, on a copy of the tracked files (a
// fresh clone, without bin/ or _artifacts/), with none of the caller's E2E_ variables:
//
//   - make e2e: make -n shows it builds bin/e2e, checks the flags, the lane and the knobs,
//     builds the tools and runs the sim lane; the check is run here for real (exit 0). The run
//     itself is not repeated here: test/simlane runs the sim lane green through bin/e2e.
//   - make test: make -n shows it builds the tools and runs the checks and go test; running it
//     here would run this test inside itself.
//   - make repro ARTIFACTS=<dir>: run for real, on the artifacts of a kubernetes lane run as
//     bin/e2e writes them (report.WriteRepro): it reruns that lane up to its preflight.
//   - make e2e LANE=kubernetes: run for real, up to its preflight, which refuses this machine
//     (exit 2) saying what is missing.
func TestFirstScreenCommandsWork(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds bin/e2e in a copy of the repository")
	}
	cmds := firstScreenCommands(t)
	if len(cmds) == 0 {
		t.Fatal("README.md's first screen has no sh block of commands")
	}
	refusesHere(t)
	repo := freshCopy(t)
	for _, cmd := range cmds {
		t.Run(cmd, func(t *testing.T) {
			switch cmd {
			case "make e2e":
				out := run(t, repo, 0, "make", "-n", "e2e")
				for _, want := range []string{"go build -o bin/e2e ./cmd/e2e", "bin/e2e run --check --lane sim --lanes-dir lanes",
					"hack/tools/build.sh", "bin/e2e run --lane sim --lanes-dir lanes"} {
					if !strings.Contains(out, want) {
						t.Errorf("make -n e2e does not run %q:\n%s", want, out)
					}
				}
				run(t, repo, 0, "make", "bin/e2e")
				run(t, repo, 0, "bin/e2e", "run", "--check", "--lane", "sim", "--lanes-dir", "lanes")
			case "make test":
				out := run(t, repo, 0, "make", "-n", "test")
				for _, want := range []string{"hack/tools/build.sh", "go test -count=1", "lanes check", "workflow check", "mod tidy -diff"} {
					if !strings.Contains(out, want) {
						t.Errorf("make -n test does not run %q:\n%s", want, out)
					}
				}
			case "make repro ARTIFACTS=<dir>":
				dir := t.TempDir()
				if _, err := report.WriteRepro(dir, filepath.Join(repo, "lanes", "kubernetes.yaml"), report.Repro{Lane: "kubernetes", RunID: "docsrepro"}); err != nil {
					t.Fatal(err)
				}
				out := run(t, repo, 2, "make", "repro", "ARTIFACTS="+dir)
				for _, want := range []string{"e2e repro: rerunning lane kubernetes", "phase preflight failed", "verdict: fail (exit 2)"} {
					if !strings.Contains(out, want) {
						t.Errorf("make repro does not say %q:\n%s", want, out)
					}
				}
			case "make e2e LANE=kubernetes":
				out := run(t, repo, 2, "make", "e2e", "LANE=kubernetes")
				for _, want := range []string{"lane kubernetes (kind substrate)", "phase preflight failed", "FAIL preflight (kind):", "verdict: fail (exit 2)"} {
					if !strings.Contains(out, want) {
						t.Errorf("make e2e LANE=kubernetes does not say %q:\n%s", want, out)
					}
				}
				m := regexp.MustCompile(`artifacts (\S+)`).FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("make e2e LANE=kubernetes names no artifacts folder:\n%s", out)
				}
				if data, err := os.ReadFile(filepath.Join(m[1], "substrate", "preflight.txt")); err != nil || !strings.Contains(string(data), "MISSING") {
					t.Errorf("substrate/preflight.txt names nothing missing (%v):\n%s", err, data)
				}
			default:
				t.Errorf("README.md's first screen has the command %q, which this test does not know how to run: add it here", cmd)
			}
		})
	}
}

// refusesHere fails the test when the real lane's preflight could pass on this machine: the
// commands would then install a platform, which is not this test's to do.
func refusesHere(t *testing.T) {
	t.Helper()
	l, err := lane.Load(filepath.Join(root, "lanes", "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Platform != nil && l.Platform.Source != "release:unknown" && runtime.NumCPU() >= l.Runner.CPUs {
		t.Fatalf("lane kubernetes pins a platform (%s) and this machine has %d CPUs: its preflight may pass here, and the first screen's real-lane commands would install it; run them on a machine the preflight refuses", l.Platform.Source, runtime.NumCPU())
	}
}

// freshCopy copies the tracked files of the repository, as they are in the work tree, into a
// new folder. The folder's path is the same on every run from this checkout, so Go's build
// cache, which keys a package by its folder, serves the copy's packages once they were built.
func freshCopy(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v (the test copies the tracked files: it needs git and a checkout)", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(abs))
	dst := filepath.Join(os.TempDir(), "cozy-e2e-first-screen-"+hex.EncodeToString(sum[:6]), "cozy-e2e")
	if err := os.RemoveAll(filepath.Dir(dst)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(dst)) })
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, rel)
		info, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if info.Mode()&os.ModeSymlink != 0 {
			link, err := os.Readlink(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(link, to); err != nil {
				t.Fatal(err)
			}
			continue
		}
		copyFile(t, src, to, info.Mode().Perm())
	}
	return dst
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// run runs a command in dir as a person would from a fresh shell, with none of the caller's E2E_
// or make variables, and fails the test unless it exits with code. A command still running
// after 10 minutes is killed with everything it started.
func run(t *testing.T, dir string, code int, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	if strings.HasPrefix(name, "bin/") {
		c.Path = filepath.Join(dir, name)
	}
	c.Dir = dir
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "E2E_"), k == "LANE", k == "LANES_DIR", k == "ARTIFACTS", k == "WORK",
			k == "MAKEFLAGS", k == "MFLAGS", k == "MAKELEVEL", k == "GITHUB_STEP_SUMMARY", k == "KUBECONFIG":
		default:
			c.Env = append(c.Env, kv)
		}
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	start := time.Now()
	err := c.Run()
	got := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
		}
		got = ee.ExitCode()
	}
	t.Logf("%s %s: exit %d in %s", name, strings.Join(args, " "), got, time.Since(start).Round(time.Millisecond))
	if got != code {
		t.Fatalf("%s %s: exit %d, want %d:\n%s", name, strings.Join(args, " "), got, code, out.String())
	}
	return out.String()
}
