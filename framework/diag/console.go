package diag

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ConsoleContainer is the virt-launcher container whose log is the guest's serial console.
const ConsoleContainer = "guest-console-log"

// consoleDrain is how long a console stream keeps reading after its launcher Pod is deleted or
// its container restarted, so the last lines written before that are not lost. It is an internal
// drain interval, not a wait on the product.
const consoleDrain = 2 * time.Second

// consoleRetry is how often a console whose log cannot be read yet (the container is starting)
// is tried again, until its launcher goes away or the stream is stopped.
const consoleRetry = 500 * time.Millisecond

var vmiGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}

// ConsoleRecord is one console file: which VMI and launcher container it reads, and when.
type ConsoleRecord struct {
	Pool    string `json:"pool"`
	VMI     string `json:"vmi"`
	VMIUID  string `json:"vmiUID"`
	Pod     string `json:"pod"`
	PodUID  string `json:"podUID"`
	Restart int32  `json:"restart"`
	Node    string `json:"node,omitempty"`
	Path    string `json:"path"`
	// LauncherStart is when the console container started; ReadStart and ReadEnd bound the read.
	LauncherStart time.Time `json:"launcherStart"`
	ReadStart     time.Time `json:"readStart"`
	ReadEnd       time.Time `json:"readEnd,omitzero"`
	// FirstLine and LastLine are the absolute stamps of the first and last console lines.
	FirstLine time.Time `json:"firstLine,omitzero"`
	LastLine  time.Time `json:"lastLine,omitzero"`
	Lines     int       `json:"lines"`
	Bytes     int64     `json:"bytes"`
	EndReason string    `json:"endReason,omitempty"`
	Truncated bool      `json:"truncated,omitempty"`
	Error     string    `json:"error,omitempty"`
}

// consoles streams the serial console of every VMI of a watched pool from its launcher's start,
// one file per launcher container instance: a replaced VMI or a restarted container gets a new
// file and the old one is kept.
type consoles struct {
	rec *Recorder
	ctx context.Context
	dyn dynamic.Interface

	mu      sync.Mutex
	streams map[string]*consoleStream // by pod UID + restart count
	stopped bool                      // no stream starts once set
	wg      sync.WaitGroup
}

type consoleStream struct {
	rec    ConsoleRecord // owned by the follow goroutine until done is closed
	cancel context.CancelFunc
	poke   chan struct{}
	done   chan struct{}

	mu     sync.Mutex
	reason string // why the stream ends, once known
}

// end records why the stream ends; the first reason wins. It reports whether it was the first.
func (s *consoleStream) end(reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason != "" {
		return false
	}
	s.reason = reason
	return true
}

func (s *consoleStream) endReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// pod is called with every version of every management Pod.
func (c *consoles) pod(u *unstructured.Unstructured, deleted bool) {
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
		return
	}
	vmi := vmiOfLauncher(&pod)
	if vmi == "" || pod.Annotations[tenant.AnnotationEphemeralProvisioning] == "true" {
		return // no launcher, or KubeVirt's temporary one that runs no guest
	}
	pn, ok := c.rec.pools.of(vmi)
	if !ok || !hasConsole(&pod) {
		return
	}
	st, started, restart := consoleStatus(&pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	prefix := string(pod.UID) + "/"
	for key, s := range c.streams {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		switch {
		case deleted:
			s.stop("launcher pod deleted")
		case key != fmt.Sprintf("%s%d", prefix, restart):
			s.stop("console container restarted")
		default:
			s.nudge()
		}
	}
	if deleted || !started || c.stopped || c.ctx.Err() != nil {
		return
	}
	key := fmt.Sprintf("%s%d", prefix, restart)
	if _, ok := c.streams[key]; ok {
		return
	}
	rec := ConsoleRecord{
		Pool: pn.Pool, VMI: vmi, VMIUID: pod.Labels["kubevirt.io/created-by"], Pod: pod.Name, PodUID: string(pod.UID),
		Restart: restart, Node: pod.Spec.NodeName, LauncherStart: st,
		Path: fmt.Sprintf("%s/consoles/%s/%s-%d.log", poolDir(pn), vmi, pod.Name, restart),
	}
	ctx, cancel := context.WithCancel(c.ctx)
	s := &consoleStream{rec: rec, cancel: cancel, poke: make(chan struct{}, 1), done: make(chan struct{})}
	c.streams[key] = s
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(s.done)
		c.follow(ctx, s, pod.Namespace)
	}()
}

func hasConsole(p *corev1.Pod) bool {
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, ct := range list {
			if ct.Name == ConsoleContainer {
				return true
			}
		}
	}
	return false
}

// consoleStatus is when the console container's current instance started and its restart count.
func consoleStatus(p *corev1.Pod) (time.Time, bool, int32) {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name != ConsoleContainer {
				continue
			}
			switch {
			case cs.State.Running != nil:
				return cs.State.Running.StartedAt.Time, true, cs.RestartCount
			case cs.State.Terminated != nil:
				return cs.State.Terminated.StartedAt.Time, true, cs.RestartCount
			}
			return time.Time{}, false, cs.RestartCount
		}
	}
	return time.Time{}, false, 0
}

func (s *consoleStream) nudge() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// stop ends the stream after the drain interval.
func (s *consoleStream) stop(reason string) {
	if s.end(reason) {
		time.AfterFunc(consoleDrain, s.cancel)
	}
}

// follow reads one console container instance into its file until the stream ends.
func (c *consoles) follow(ctx context.Context, s *consoleStream, namespace string) {
	a := c.rec.opts.Artifacts
	rec := &s.rec
	if rec.VMIUID == "" {
		if u, err := c.dyn.Resource(vmiGVR).Namespace(namespace).Get(ctx, rec.VMI, metav1.GetOptions{}); err == nil {
			rec.VMIUID = string(u.GetUID())
		} else {
			rec.VMIUID = "unknown (" + err.Error() + ")"
		}
	}
	f, err := a.Create(rec.Path, c.rec.opts.Limits.ConsoleBytes)
	if err != nil {
		c.finish(s, nil, 0, err)
		return
	}
	rec.ReadStart = c.rec.now()
	header, endOff := consoleHeader(namespace, rec)
	_, _ = f.Write(header)
	_ = f.Flush()
	var readErr error
	for {
		readErr = c.read(ctx, s, f, namespace)
		if ctx.Err() != nil || errors.Is(readErr, ErrLimit) || readErr == nil {
			break
		}
		// The log is not readable yet (container starting): try again on the next Pod change.
		select {
		case <-ctx.Done():
		case <-s.poke:
		case <-time.After(consoleRetry):
		}
		if ctx.Err() != nil {
			break
		}
	}
	c.finish(s, f, endOff, readErr)
}

func (c *consoles) read(ctx context.Context, s *consoleStream, f *File, namespace string) error {
	rec := &s.rec
	opts := &corev1.PodLogOptions{Container: ConsoleContainer, Follow: true, Timestamps: true}
	if !rec.LastLine.IsZero() {
		// A reopened stream resumes after the last line read.
		since := metav1.NewTime(rec.LastLine.Add(time.Nanosecond))
		opts.SinceTime = &since
	}
	stream, err := c.rec.opts.Management.Kube.CoreV1().Pods(namespace).GetLogs(rec.Pod, opts).Stream(ctx)
	if err != nil {
		return err
	}
	defer stream.Close()
	br := bufio.NewReaderSize(stream, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if ts, _, ok := strings.Cut(line, " "); ok {
				if t, perr := time.Parse(time.RFC3339Nano, ts); perr == nil {
					if rec.FirstLine.IsZero() {
						rec.FirstLine = t
					}
					rec.LastLine = t
				}
			}
			rec.Lines++
			if _, werr := f.Write([]byte(line)); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			s.end("stream ended (container exited)")
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// finish patches the read end into the header, closes the file and keeps the record.
func (c *consoles) finish(s *consoleStream, f *File, endOff int64, err error) {
	rec := &s.rec
	rec.ReadEnd = c.rec.now()
	if errors.Is(err, ErrLimit) {
		rec.Truncated = true
		s.end(fmt.Sprintf("byte bound %d reached", c.rec.opts.Limits.ConsoleBytes))
		err = nil
	}
	s.end("stopped at the end of the stream")
	rec.EndReason = s.endReason()
	if err != nil {
		rec.Error = err.Error()
	}
	if f != nil {
		_ = f.Flush()
		if endOff > 0 {
			_ = f.Patch(endOff, []byte(readEndField(rec.ReadEnd, rec.EndReason)))
		}
		_ = f.Close()
		rec.Bytes = f.Size()
	}
}

// records returns every console read so far, for consoles.json and the baseline.
func (c *consoles) records() []ConsoleRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ConsoleRecord, 0, len(c.streams))
	for _, s := range c.streams {
		select {
		case <-s.done:
			out = append(out, s.rec)
		default:
		}
	}
	return out
}

// all returns the identity of every console stream, running or finished (for collectors that
// must not read a console twice).
func (c *consoles) all() []ConsoleRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ConsoleRecord, 0, len(c.streams))
	for _, s := range c.streams {
		out = append(out, ConsoleRecord{Pool: s.rec.Pool, Pod: s.rec.Pod, PodUID: s.rec.PodUID, Restart: s.rec.Restart, Path: s.rec.Path})
	}
	return out
}

// paths are the console files of pool, running or finished, sorted.
func (c *consoles) paths(pool string) []string {
	var out []string
	for _, r := range c.all() {
		if r.Pool == pool {
			out = append(out, r.Path)
		}
	}
	sort.Strings(out)
	return out
}

// stopAll ends every stream now and waits for their files to close.
func (c *consoles) stopAll(reason string) {
	c.mu.Lock()
	c.stopped = true
	for _, s := range c.streams {
		s.end(reason)
		s.cancel()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

const stampLayout = "2006-01-02T15:04:05.000000000Z07:00"

// consoleHeader is the head of a console file and the offset of its fixed-width read-end field.
func consoleHeader(namespace string, r *ConsoleRecord) ([]byte, int64) {
	var b strings.Builder
	fmt.Fprintf(&b, "# serial console of VMI %s/%s (pool %s)\n", namespace, r.VMI, r.Pool)
	fmt.Fprintf(&b, "# vmi uid: %s\n", r.VMIUID)
	fmt.Fprintf(&b, "# launcher: pod %s (uid %s), container %s, restart %d, node %s\n", r.Pod, r.PodUID, ConsoleContainer, r.Restart, r.Node)
	fmt.Fprintf(&b, "# launcher start: %s (epoch %s seconds)\n", r.LauncherStart.UTC().Format(stampLayout), epoch(r.LauncherStart))
	fmt.Fprintf(&b, "# read start:     %s (epoch %s seconds)\n", r.ReadStart.UTC().Format(stampLayout), epoch(r.ReadStart))
	b.WriteString("# read end:       ")
	off := int64(b.Len())
	b.WriteString(readEndField(time.Time{}, "still reading"))
	b.WriteString("\n# each line: <absolute time the line was logged, RFC 3339, UTC> <the guest's own output, with its own relative stamps>\n")
	return []byte(b.String()), off
}

// readEndField is the fixed-width read-end field: time, epoch seconds and why the read ended.
func readEndField(t time.Time, reason string) string {
	ts, ep := strings.Repeat("-", len(stampLayout)-5), "-"
	if !t.IsZero() {
		ts, ep = t.UTC().Format(stampLayout), epoch(t)
	}
	s := fmt.Sprintf("%-30s (epoch %16s seconds) %-44.44s", ts, ep, reason)
	return s
}
