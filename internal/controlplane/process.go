package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one control plane process.
type Process struct {
	Name    string
	Path    string
	Args    []string
	LogPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *os.File
}

// Start runs the process with its output in LogPath. It dies when the harness dies.
func (p *Process) Start() error {
	log, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: log file: %w", p.Name, err)
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("%s: start %s: %w", p.Name, p.Path, err)
	}
	p.mu.Lock()
	p.cmd, p.log, p.done = cmd, log, make(chan struct{})
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		log.Close()
		close(p.done)
	}()
	return nil
}

// Exited reports whether the process ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// Done is closed when the process started last ends; nil before Start.
func (p *Process) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Tail is the last lines of the process log (at most max bytes of them), for a person.
func (p *Process) Tail(lines, max int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	out := strings.Join(all, "\n")
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

// Pid is the process id, 0 before Start.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace. Idempotent.
func (p *Process) Stop(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// tail is the end of the process log, for error messages.
func (p *Process) tail(lines int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return "    " + strings.Join(all, "\n    ")
}

// WaitFor polls ready until it returns nil, the process exits, or ctx ends; the error names
// the process, what it waited for, and the end of its log.
func (p *Process) WaitFor(ctx context.Context, what string, ready func(context.Context) error) error {
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s exited (%v) before %s; end of %s:\n%s", p.Name, err, what, p.LogPath, p.tail(15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not %s after %s (%w); last answer: %v; end of %s:\n%s",
				p.Name, what, time.Since(start).Round(time.Millisecond), ctx.Err(), last, p.LogPath, p.tail(15))
		case <-tick.C:
		}
	}
}

// Readyz is a readiness check that GETs base+"/readyz" with hc and wants 200.
func Readyz(hc *http.Client, base string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", resp.StatusCode)
		}
		return nil
	}
}
