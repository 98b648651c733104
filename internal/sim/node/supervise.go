package node

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// supervised is one process of the node (containerd, the kubelet), started again whenever it
// dies until stop, as a service manager would restart it.
type supervised struct {
	name    string
	path    string
	args    []string
	logPath string
	log     io.Writer // the node's own log: each restart is said there
	// pidns and mntns are the PID and mount namespaces the process is started in (the node's:
	// host.go), or "" for this process's own.
	pidns, mntns string

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
	cmd := commandIn(s.mntns, s.path, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startIn(cmd, s.pidns); err != nil {
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

// commandIn is the command name args in the mount namespace at mntns ("" for this process's
// own). Go cannot enter a mount namespace (setns refuses a threaded process); nsenter, one
// thread, enters it and execs the program, whose pid stays nsenter's.
func commandIn(mntns, name string, args ...string) *exec.Cmd {
	if mntns == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("nsenter", append([]string{"--mount=" + mntns, "--", name}, args...)...)
}

// startIn starts cmd in the PID namespace at nsPath ("" for this process's own). The forking
// thread enters it for its children only (setns with CLONE_NEWPID changes the namespace a
// thread's later children are born in, never its own) and goes back to its own before it serves
// any other goroutine. Such a child has no Pdeathsig: Go's child kills itself at once when
// getppid differs from its parent's pid (Go 1.26 syscall/exec_linux.go:549-566), and in a
// namespace of its own its parent's pid reads 0. It needs none: the namespace's init has one
// (its own self-kill is ignored, as a namespace's init ignores signals it has no handler for),
// and when the init ends the kernel ends every process of its namespace.
func startIn(cmd *exec.Cmd, nsPath string) error {
	if nsPath == "" {
		return cmd.Start()
	}
	if cmd.SysProcAttr != nil {
		cmd.SysProcAttr.Pdeathsig = 0
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/pid")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer own.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("the node's PID namespace: %w", err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWPID); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering the node's PID namespace %s: %w", nsPath, err)
			return
		}
		err = cmd.Start()
		if back := unix.Setns(int(own.Fd()), unix.CLONE_NEWPID); back != nil {
			// the thread stays locked and ends with this goroutine, never forking for another
			errc <- fmt.Errorf("leaving the node's PID namespace: %w (start: %v)", back, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}
