package guestos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// restartInterval is how long Talos waits before it starts a service of restart type Forever
// again (siderolabs/talos v1.13.6 internal/app/machined/pkg/system/runner/restart/restart.go
// :76-82, DefaultOptions; the kubelet's: internal/app/machined/pkg/system/services/kubelet.go
// :190-217).
const restartInterval = 5 * time.Second

// Service is a process the OS runs as Talos runs a service: restarted forever, restartInterval
// apart, each state change said on the console as machined says it (log.Printf("service[%s](%s):
// %s"): internal/app/machined/pkg/system/service_runner.go:89), with the last 512 bytes of its
// output in the error it exits with (runner/containerd/containerd.go:244-247,
// runner/internal/lastlog/lastlog.go).
type Service struct {
	// ID is the service's name (kubelet, cri).
	ID string
	// Cmd makes the command of one run.
	Cmd func() *exec.Cmd
	// Before runs before each start (nil: nothing).
	Before func() error
	// Healthy is the health check (nil: none), run 2 s after a start and every 5 s after
	// (system/health/settings.go:19-23; services/kubelet.go:221-231).
	Healthy func(context.Context) error
	// Log is where its output goes besides the last-log ring.
	Log io.Writer
	// Console says the service's states.
	Console *log.Logger
	// CrashOnce kills the task of the service's first run (SIGKILL) as soon as its output holds
	// a whole line: the stand-in's one crash of a service (CrashOnceEnv).
	CrashOnce bool

	mu sync.Mutex
	// health is the last health the console said (nil: none yet), kept across restarts as
	// machined keeps a service's health (service_runner.go:116-138 says a change only).
	health *bool
	// crashed: CrashOnce's kill was sent.
	crashed bool
}

func (s *Service) say(state, format string, args ...any) {
	s.Console.Printf("service[%s](%s): %s", s.ID, state, fmt.Sprintf(format, args...))
}

// Run runs the service until ctx ends.
func (s *Service) Run(ctx context.Context) {
	s.say("Starting", "Starting service")
	s.say("Preparing", "Running pre state")
	s.say("Preparing", "Creating service runner")
	for {
		err := s.runOnce(ctx)
		if ctx.Err() != nil {
			s.say("Finished", "Service finished successfully")
			return
		}
		// restart.go:141-146
		if err == nil {
			s.say("Waiting", "Runner Containerd(%s) exited without error, going to restart it", s.ID)
		} else {
			s.say("Waiting", "Error running Containerd(%s), going to restart forever: %v", s.ID, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartInterval):
		}
	}
}

func (s *Service) runOnce(ctx context.Context) error {
	if s.Before != nil {
		if err := s.Before(); err != nil {
			return err
		}
	}
	last := &lastLog{line: make(chan struct{})}
	cmd := s.Cmd()
	// One writer for both, so they share one pipe and keep their order (os/exec: Stdout ==
	// Stderr).
	out := io.MultiWriter(s.Log, last)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("task %q failed: %w", s.ID, err)
	}
	s.say("Running", "Started task %s (PID %d) for container %s", s.ID, cmd.Process.Pid, s.ID)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	if s.Healthy != nil {
		go s.watchHealth(hctx)
	}
	if s.CrashOnce && !s.crashed {
		s.crashed = true
		go func() {
			select {
			case <-last.line:
				_ = cmd.Process.Kill()
			case <-hctx.Done():
			}
		}()
	}
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("task %q failed: exit code %d (last log %q)", s.ID, exitCode(exit), last.String())
		}
		return err
	case <-ctx.Done():
		s.say("Stopping", "Sending SIGTERM to task %s (PID %d, container %s)", s.ID, cmd.Process.Pid, s.ID)
		_ = cmd.Process.Signal(os.Interrupt)
		<-done
		return nil
	}
}

// exitCode is a task's exit status as containerd reports it: 128+N for one killed by signal N
// (containerd/containerd v2.2.4 pkg/sys/reaper/reaper_unix.go:281-288, exitStatus).
func exitCode(exit *exec.ExitError) int {
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exit.ExitCode()
}

// watchHealth says the health check's result whenever it changes (service_runner.go:116-138).
func (s *Service) watchHealth(ctx context.Context) {
	wait := 2 * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = 5 * time.Second
		hctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := s.Healthy(hctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		ok := err == nil
		s.mu.Lock()
		same := s.health != nil && *s.health == ok
		s.health = &ok
		s.mu.Unlock()
		if same {
			continue
		}
		if ok {
			s.say("Running", "Health check successful")
		} else {
			s.say("Running", "Health check failed: %v", err)
		}
	}
}

// lastLog keeps the last 512 bytes of a task's output, whole lines where it can, as Talos'
// lastlog.Writer does.
type lastLog struct {
	mu  sync.Mutex
	buf []byte
	// line, when not nil, is closed once the output holds a whole line.
	line  chan struct{}
	lined bool
}

func (l *lastLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if l.line != nil && !l.lined && bytes.IndexByte(p, '\n') >= 0 {
		l.lined = true
		close(l.line)
	}
	for len(l.buf) > 512 {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 || i+1 >= len(l.buf) {
			l.buf = l.buf[len(l.buf)-512:]
			break
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lastLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(bytes.TrimRight(l.buf, "\n"))
}

// healthz is the kubelet's health check: GET http://127.0.0.1:10248/healthz answers 200
// (services/kubelet.go:257-277).
func healthz(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:10248/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("expected HTTP status OK, got %s", resp.Status)
	}
	return nil
}
