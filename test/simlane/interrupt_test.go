package simlane

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// maxInterrupted bounds a run from the signal to its exit (issue 3).
const maxInterrupted = 30 * time.Second

// TestSignalEndsTheRunCleanly interrupts the sim lane mid-run, as Ctrl-C or a cancelled CI job
// does, and holds it to the lifecycle contract: the run ends within 30 s of the signal, exits
// 130 with an "interrupted" verdict written, and leaves behind no process it started and none of
// its temp folders.
func TestSignalEndsTheRunCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("brings the sim lane up twice; run without -short")
	}
	root := projectRoot(t)
	bin := buildOrchestrator(t, root)
	cases := []struct {
		name   string
		sig    syscall.Signal
		marker string // the harness.log line after which the signal is sent
		want   []string
	}{
		// Mid-suite: both tenant control planes up, workers joining: the most processes alive.
		{"SIGINT while pools join", syscall.SIGINT, ": disk-import:", []string{"etcd", "kube-apiserver", "kwok"}},
		// During bring-up, before any suite ran.
		{"SIGTERM during bring-up", syscall.SIGTERM, "sim: management etcd and kube-apiserver ready", []string{"etcd", "kube-apiserver"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			tmp, art := filepath.Join(base, "tmp"), filepath.Join(base, "artifacts")
			if err := os.Mkdir(tmp, 0o755); err != nil {
				t.Fatal(err)
			}
			// Every folder the run makes lands in base, and every process it starts names a
			// file there: that is how its leftovers are found.
			cmd := laneCommand(root, bin, "sim", "TMPDIR="+tmp, "E2E_ARTIFACTS="+art)
			pr, pw := io.Pipe()
			var log bytes.Buffer
			cmd.Stdout, cmd.Stderr = pw, pw
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { err := cmd.Wait(); pw.Close(); done <- err }()
			go func() {
				sc := bufio.NewScanner(pr)
				sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
				for sc.Scan() {
					log.WriteString(sc.Text() + "\n")
				}
				_, _ = io.Copy(io.Discard, pr)
			}()
			// The markers are details: harness.log has them, the terminal only what matters.
			seen, stopWatching := make(chan struct{}), make(chan struct{})
			defer close(stopWatching)
			go func() {
				for {
					if data, err := os.ReadFile(filepath.Join(art, "harness.log")); err == nil && bytes.Contains(data, []byte(c.marker)) {
						close(seen)
						return
					}
					select {
					case <-stopWatching:
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
			}()
			select {
			case <-seen:
			case err := <-done:
				t.Fatalf("the run ended (%v) before printing %q:\n%s", err, c.marker, tail(log.String(), 40))
			case <-time.After(interruptTimeout):
				_ = cmd.Process.Kill()
				t.Fatalf("no %q in the run's output after %s:\n%s", c.marker, interruptTimeout, tail(log.String(), 40))
			}

			// The detector must see the run's processes before it may vouch for their absence.
			alive := processesNaming(base)
			for _, w := range c.want {
				if !anyNamed(alive, w) {
					t.Fatalf("before the signal: no %s process names %s; running: %v", w, base, alive)
				}
			}
			sent := time.Now()
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			var werr error
			select {
			case werr = <-done:
			case <-time.After(2 * maxInterrupted):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				_ = cmd.Process.Kill()
				werr = <-done
			}
			took := time.Since(sent)
			t.Logf("%s: ended %s after the signal (%d processes of the run were up)", c.name, took.Round(10*time.Millisecond), len(alive))
			if took > maxInterrupted {
				t.Errorf("the run ended %s after %s, more than %s", took.Round(time.Millisecond), c.sig, maxInterrupted)
			}
			code := exitCode(werr)
			if code != verdict.ExitInterrupted {
				t.Errorf("exit code %d, want %d", code, verdict.ExitInterrupted)
			}
			v, err := verdict.ReadVerdict(filepath.Join(art, "verdict.json"))
			if err != nil {
				t.Errorf("no verdict after %s: %v", c.sig, err)
			} else if v.Result != verdict.Interrupted || v.ExitCode != verdict.ExitInterrupted {
				t.Errorf("verdict %s exit %d, want %s %d (%s)", v.Result, v.ExitCode, verdict.Interrupted, verdict.ExitInterrupted, v.Reason)
			}

			// Processes the run stopped may take a moment to be reaped; none may survive it.
			var left []process
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if left = processesNaming(base); len(left) == 0 || time.Now().After(deadline) {
					break
				}
			}
			for _, p := range left {
				t.Errorf("left behind: pid %d %s", p.pid, p.cmdline)
			}
			if temps, _ := filepath.Glob(filepath.Join(tmp, "cozy-e2e-*")); len(temps) > 0 {
				t.Errorf("temp folders left behind: %v", temps)
			}
			if t.Failed() {
				t.Logf("run output:\n%s", tail(log.String(), 60))
			}
		})
	}
}

type process struct {
	pid     int
	name    string
	cmdline string
}

// processesNaming lists the live processes whose command line names a path under dir.
func processesNaming(dir string) []process {
	entries, _ := os.ReadDir("/proc")
	var out []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 || !bytes.Contains(raw, []byte(dir)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && zombie(stat) {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		out = append(out, process{pid: pid, name: filepath.Base(args[0]), cmdline: strings.Join(args, " ")})
	}
	return out
}

// zombie: an exited process its parent has not reaped yet holds nothing but its pid.
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func anyNamed(ps []process, name string) bool {
	for _, p := range ps {
		if p.name == name {
			return true
		}
	}
	return false
}
