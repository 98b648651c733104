package join

import (
	"bufio"
	"context"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// ConsoleContainer is KubeVirt's container that copies the VMI's serial console to its log
// (present when the pool sets logSerialConsole).
const ConsoleContainer = "guest-console-log"

// consoleState is what the harness read so far from one VMI's serial console.
type consoleState struct {
	Pod     string
	Lines   int
	Last    string    // the last line
	LastAt  time.Time // when it was read
	Joined  bool      // a line said the guest joined
	Refused string    // the first line in which the join was refused
	Err     string    // why the console cannot be read right now
}

// consoles follows the serial console of every launcher Pod it is shown, one stream each,
// from the first line, across stream ends (a stream that ends is reopened and its lines
// already read are skipped). Each new line pokes the join loop.
type consoles struct {
	kube      kubernetes.Interface
	namespace string
	poke      func()
	// reopen is how long a broken stream waits before it is read again (an internal interval).
	reopen time.Duration

	mu    sync.Mutex
	state map[string]*consoleState // by launcher Pod
	words map[string]osfamily.Family
	stop  map[string]context.CancelFunc
	wg    sync.WaitGroup
}

func newConsoles(kube kubernetes.Interface, namespace string, poke func()) *consoles {
	return &consoles{kube: kube, namespace: namespace, poke: poke, reopen: time.Second,
		state: map[string]*consoleState{}, stop: map[string]context.CancelFunc{}, words: map[string]osfamily.Family{}}
}

// follow starts reading launcher's console once its console container has started, judging its
// lines with the words of family os; it does nothing when it reads it already.
func (c *consoles) follow(ctx context.Context, launcher *corev1.Pod, os osfamily.Family) {
	if !consoleStarted(launcher) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.state[launcher.Name]; ok {
		return
	}
	st := &consoleState{Pod: launcher.Name}
	c.state[launcher.Name] = st
	c.words[launcher.Name] = os
	sctx, cancel := context.WithCancel(ctx)
	c.stop[launcher.Name] = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.read(sctx, st)
	}()
}

// get is a copy of the console state of launcher Pod pod; false when it is not read.
func (c *consoles) get(pod string) (consoleState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.state[pod]
	if !ok {
		return consoleState{}, false
	}
	return *st, true
}

// close stops every stream and waits for the readers.
func (c *consoles) close() {
	c.mu.Lock()
	for _, cancel := range c.stop {
		cancel()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *consoles) read(ctx context.Context, st *consoleState) {
	for ctx.Err() == nil {
		seen := 0
		rc, err := c.kube.CoreV1().Pods(c.namespace).GetLogs(st.Pod, &corev1.PodLogOptions{Container: ConsoleContainer, Follow: true}).Stream(ctx)
		if err == nil {
			sc := bufio.NewScanner(rc)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				seen++
				c.mu.Lock()
				skip := seen <= st.Lines
				if !skip {
					c.line(st, sc.Text())
				}
				c.mu.Unlock()
				if !skip {
					c.poke()
				}
			}
			err = sc.Err()
			rc.Close()
		}
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		st.Err = ""
		if err != nil {
			st.Err = "console of " + st.Pod + " unreadable: " + err.Error()
		}
		c.mu.Unlock()
		t := time.NewTimer(c.reopen)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// line takes one console line; c.mu is held.
func (c *consoles) line(st *consoleState, text string) {
	st.Lines++
	st.Last, st.LastAt, st.Err = text, time.Now(), ""
	os := c.words[st.Pod]
	if os.ConsoleJoined != nil && os.ConsoleJoined.MatchString(text) {
		st.Joined = true
	}
	if st.Refused == "" && os.ConsoleRefused != nil && os.ConsoleRefused.MatchString(text) {
		st.Refused = text
	}
}

func consoleStarted(p *corev1.Pod) bool {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name == ConsoleContainer && (cs.State.Running != nil || cs.State.Terminated != nil) {
				return true
			}
		}
	}
	return false
}
