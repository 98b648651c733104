package node

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// supervised is one process of the node (containerd, the kubelet), started again whenever it
// dies until stop, as a service manager would restart it.
type supervised struct {
	name    string
	path    string
	args    []string
	logPath string
	log     io.Writer // the node's own log: each restart is said there

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	stopping bool
	restarts int
	lastErr  error
	stopped  chan struct{}
}

// restartDelay is how long a dead process stays down before it is started again.
const restartDelay = time.Second

func (s *supervised) start() error {
	if err := s.spawn(); err != nil {
		return err
	}
	s.stopped = make(chan struct{})
	go s.watch()
	return nil
}

func (s *supervised) spawn() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: log file: %w", s.name, err)
	}
	cmd := exec.Command(s.path, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%s: start %s: %w", s.name, s.path, err)
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	if s.stopping { // stop came while this one started: it must not outlive the node
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		close(exited)
	}()
	return nil
}

// watch restarts the process each time it dies, until stop.
func (s *supervised) watch() {
	defer close(s.stopped)
	for {
		s.mu.Lock()
		exited := s.exited
		s.mu.Unlock()
		<-exited
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		s.restarts++
		n, err := s.restarts, s.lastErr
		s.mu.Unlock()
		fmt.Fprintf(s.log, "node: %s exited (%v); starting it again in %s (restart %d; its log: %s)\n", s.name, err, restartDelay, n, s.logPath)
		time.Sleep(restartDelay)
		s.mu.Lock()
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			return
		}
		if err := s.spawn(); err != nil {
			fmt.Fprintf(s.log, "node: %s could not be started again: %v; the node runs without it\n", s.name, err)
			return
		}
	}
}

// pid is the running process's id, 0 when it is down.
func (s *supervised) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	select {
	case <-s.exited:
		return 0
	default:
		return s.cmd.Process.Pid
	}
}

// restartCount is how many times the process was started again.
func (s *supervised) restartCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// stop ends the supervision and the process: SIGTERM to its group, SIGKILL after grace.
func (s *supervised) stop(grace time.Duration) {
	s.mu.Lock()
	if s.cmd == nil || s.stopping {
		s.mu.Unlock()
		return
	}
	s.stopping = true
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	select {
	case <-exited:
	default:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(grace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	<-s.stopped
}
