package guestos

import (
	"context"
	"errors"
	"io"
	"log"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// A service that fails is started again restartInterval later, and the console says so in
// machined's words with the task's last output; a healthy one's health check is said once.
func TestAServiceRestartsForeverAndSaysWhy(t *testing.T) {
	var con testkit.Buffer
	var runs atomic.Int32
	s := &Service{ID: "kubelet", Log: io.Discard, Console: log.New(&con, "[talos] ", 0),
		Cmd: func() *exec.Cmd {
			if runs.Add(1) <= 2 {
				return exec.Command("sh", "-c", "echo starting; echo 'x509: certificate signed by unknown authority' >&2; sleep 2.5; exit 1")
			}
			return exec.Command("sleep", "30")
		},
		Healthy: func(context.Context) error {
			if runs.Load() <= 2 {
				return errors.New("connection refused")
			}
			return nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	deadline := time.Now().Add(25 * time.Second)
	for !strings.Contains(con.String(), "Health check successful") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	<-done
	out := con.String()
	for _, want := range []string{
		"[talos] service[kubelet](Starting): Starting service\n",
		"[talos] service[kubelet](Running): Started task kubelet (PID ",
		`[talos] service[kubelet](Waiting): Error running Containerd(kubelet), going to restart forever: task "kubelet" failed: exit code 1 (last log "starting\nx509: certificate signed by unknown authority")` + "\n",
		"[talos] service[kubelet](Running): Health check successful\n",
		"[talos] service[kubelet](Stopping): Sending SIGTERM to task kubelet",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("console lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "Health check successful"); n != 1 {
		t.Errorf("health said healthy %d times, want once (on its change)", n)
	}
	if n := strings.Count(out, "Health check failed: connection refused"); n != 1 {
		t.Errorf("health said failed %d times over two failing runs, want once (kept across restarts)", n)
	}
}

// The last log keeps the last 512 bytes, from a line's start where it can.
func TestLastLogKeepsTheLastLines(t *testing.T) {
	var l lastLog
	for i := 0; i < 100; i++ {
		_, _ = l.Write([]byte(strings.Repeat("a", 20) + "\n"))
	}
	_, _ = l.Write([]byte("the last line\n"))
	got := l.String()
	if len(got) > 512 || !strings.HasSuffix(got, "\nthe last line") || !strings.HasPrefix(got, "aaaa") {
		t.Errorf("last log %d bytes %q", len(got), got)
	}
	var long lastLog
	_, _ = long.Write([]byte(strings.Repeat("b", 2000)))
	if len(long.String()) != 512 {
		t.Errorf("a line longer than the limit keeps %d bytes, want its last 512", len(long.String()))
	}
}

// A service with CrashOnce is killed as soon as its first run writes a line: the console says
// it failed with exit code 137 (128+SIGKILL, as containerd reports it) and its last log, and
// its second run, started restartInterval later, is left alone.
func TestACrashOnceServiceIsKilledOnceAndRestarted(t *testing.T) {
	var con testkit.Buffer
	var runs atomic.Int32
	s := &Service{ID: "kubelet", Log: io.Discard, Console: log.New(&con, "[talos] ", 0), CrashOnce: true,
		Cmd: func() *exec.Cmd {
			runs.Add(1)
			return exec.Command("sh", "-c", "echo 'Flag --cloud-provider has been deprecated'; exec sleep 30")
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	deadline := time.Now().Add(restartInterval + 10*time.Second)
	for strings.Count(con.String(), "Started task kubelet") < 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // the second run has written its line by now: it must not be killed
	cancel()
	<-done
	out := con.String()
	want := `[talos] service[kubelet](Waiting): Error running Containerd(kubelet), going to restart forever: task "kubelet" failed: exit code 137 (last log "Flag --cloud-provider has been deprecated")` + "\n"
	if !strings.Contains(out, want) {
		t.Errorf("console lacks %q:\n%s", want, out)
	}
	if n := strings.Count(out, "going to restart forever"); n != 1 {
		t.Errorf("the service failed %d times, want once:\n%s", n, out)
	}
	if got := runs.Load(); got != 2 {
		t.Errorf("the service ran %d times, want 2:\n%s", got, out)
	}
}
