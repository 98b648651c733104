package realupstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// Backoff is how long a supervisor waits before it starts a controller that exited again: the
// kubelet's container restart back-off. Tests make it short; the sim runs KubeletBackoff.
type Backoff struct {
	// Initial is the first wait, Max the longest; each wait doubles the last.
	Initial, Max time.Duration
	// Reset: a controller that ran longer than this before it exited is started again at once,
	// and its next wait is Initial again.
	Reset time.Duration
}

// KubeletBackoff is the kubelet's back-off of kubernetes v1.35.4: pkg/kubelet/kubelet.go lines
// 162-170 (initialCrashLoopBackOff 10 s; MaxCrashLoopBackOff, which is
// pkg/kubelet/apis/config/v1beta1/defaults.go line 46, 300 s) and lines 1007-1012 (the back-off
// of a container restarts from the beginning when it ran 600 s, not client-go's 2*max). The
// gate ReduceDefaultCrashLoopBackOffDecay (lines 346-350) is alpha and off by default.
func KubeletBackoff() Backoff {
	return Backoff{Initial: 10 * time.Second, Max: 300 * time.Second, Reset: 600 * time.Second}
}

// backoffState is one container's back-off, as the kubelet keeps it in a client-go
// flowcontrol.Backoff (k8s.io/client-go v0.35.4 util/flowcontrol/backoff.go lines 95-130, no
// jitter): a first exit is restarted at once; later ones wait the current delay, counted from
// the exit, and each restart doubles it up to Max (kuberuntime_manager.go lines 1837-1853).
type backoffState struct {
	delay       time.Duration // 0: no entry yet
	lastRestart time.Time
}

// wait is how long after now a container that finished at finished waits before it starts
// again (flowcontrol's IsInBackOffSince).
func (b *backoffState) wait(finished, now time.Time, o Backoff) time.Duration {
	if b.delay == 0 || finished.Sub(b.lastRestart) > o.Reset {
		return 0
	}
	if left := b.delay - now.Sub(finished); left > 0 {
		return left
	}
	return 0
}

// restarted moves the back-off on as the kubelet does when it starts the container again
// (flowcontrol's Next).
func (b *backoffState) restarted(finished, now time.Time, o Backoff) {
	if b.delay == 0 || finished.Sub(b.lastRestart) > o.Reset {
		b.delay = o.Initial
	} else {
		b.delay = min(2*b.delay, o.Max)
	}
	b.lastRestart = now
}

// Supervisor keeps one upstream controller process running as a kubelet keeps a container of
// a platform Pod: when it exits it is started again after the kubelet's back-off, and its Pod
// object (PlatformPod) shows its restarts, its last termination and CrashLoopBackOff while it
// waits.
type Supervisor struct {
	ctl     *Controller
	pod     *podStatus
	backoff Backoff
	log     io.Writer
	cancel  context.CancelFunc
	done    chan struct{}

	mu    sync.Mutex
	crash bool
}

// crashArg is the argument every start carries once CrashLoop was called: no controller knows
// it, so each refuses it and exits (Go's flag and pflag parsing: exit 2).
const crashArg = "--cozy-e2e-sim-fault-crashloop"

// Supervise publishes ctl (running and ready) as the Pod pod describes, in c, and restarts it
// whenever it exits until Stop. log hears each exit and restart.
func Supervise(ctx context.Context, c *cluster.Cluster, ctl *Controller, pod PlatformPod, o Backoff, log io.Writer) (*Supervisor, error) {
	if ctl.restart == nil {
		return nil, fmt.Errorf("upstream: %s cannot be restarted (its Start function set no restart)", ctl.Name)
	}
	ps, err := publishPod(ctx, c, pod, ctl, log)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{ctl: ctl, pod: ps, backoff: o, log: log, cancel: cancel, done: make(chan struct{})}
	go s.run(runCtx)
	return s, nil
}

// Kill sends SIGKILL to the controller's process, as `kill -9` from outside would.
func (s *Supervisor) Kill() error {
	pid := s.ctl.Pid()
	if pid == 0 {
		return fmt.Errorf("%s is not running", s.ctl.Name)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// CrashLoop makes every later start of the controller exit at once, and kills the running one.
func (s *Supervisor) CrashLoop() error {
	s.mu.Lock()
	s.crash = true
	s.mu.Unlock()
	return s.Kill()
}

// Name is the supervised controller's name.
func (s *Supervisor) Name() string { return s.ctl.Name }

// Stop ends the supervision, then stops the process (SIGTERM, SIGKILL after grace).
func (s *Supervisor) Stop(grace time.Duration) {
	s.cancel()
	<-s.done
	s.ctl.Stop(grace)
}

// run waits for each exit and starts the controller again after its back-off.
func (s *Supervisor) run(ctx context.Context) {
	defer close(s.done)
	var b backoffState
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ctl.Done():
		}
		if ctx.Err() != nil {
			return
		}
		term := s.terminated()
		wait := b.wait(term.finished, time.Now(), s.backoff)
		s.pod.exited(ctx, term, wait)
		fmt.Fprintf(s.log, "%s sim: %s exited (%s); the kubelet's back-off starts it again in %s\n",
			time.Now().UTC().Format("15:04:05.000"), s.ctl.Name, term.describe(), wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		b.restarted(term.finished, time.Now(), s.backoff)
		if err := s.restart(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintf(s.log, "%s sim: %s did not get ready after its restart: %v\n", time.Now().UTC().Format("15:04:05.000"), s.ctl.Name, err)
			continue
		}
		s.pod.ready(ctx)
		fmt.Fprintf(s.log, "%s sim: %s ready again after its restart (%s)\n", time.Now().UTC().Format("15:04:05.000"), s.ctl.Name, s.ctl.Ready.Round(time.Millisecond))
	}
}

// restart starts the process again (with crashArg once CrashLoop was called) and waits for it
// to get ready.
func (s *Supervisor) restart(ctx context.Context) error {
	s.mu.Lock()
	crash := s.crash
	s.mu.Unlock()
	if crash && (len(s.ctl.Args) == 0 || s.ctl.Args[len(s.ctl.Args)-1] != crashArg) {
		s.ctl.Args = append(s.ctl.Args, crashArg)
	}
	s.pod.started(ctx, time.Now())
	return s.ctl.restart(ctx)
}

// termination is how the process ended, as a container's terminated state says it.
type termination struct {
	exitCode, signal int32
	started          time.Time
	finished         time.Time
	message          string
}

// Termination message: the end of the log, as the kubelet gives a container whose policy is
// FallbackToLogsOnError (kubernetes v1.35.4 pkg/kubelet/kuberuntime/kuberuntime_container.go
// lines 599-611; at most 80 lines and 2048 bytes, pkg/kubelet/container/runtime.go lines 797-802).
const (
	terminationLogLines = 80
	terminationLogBytes = 2048
)

func (s *Supervisor) terminated() termination {
	t := termination{finished: time.Now(), started: s.ctl.Started, message: s.ctl.Tail(terminationLogLines, terminationLogBytes)}
	_, err := s.ctl.Exited()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			if ws.Signaled() {
				// A container killed by a signal exits 128+signal (the runtime's convention).
				t.signal, t.exitCode = int32(ws.Signal()), 128+int32(ws.Signal())
			} else {
				t.exitCode = int32(ws.ExitStatus())
			}
		}
	}
	return t
}

func (t termination) describe() string {
	if t.signal != 0 {
		return fmt.Sprintf("signal %s, exit %d", syscall.Signal(t.signal), t.exitCode)
	}
	return fmt.Sprintf("exit %d", t.exitCode)
}
