package diag

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// ConsoleContainer is the virt-launcher container whose log is the guest's serial console.
const ConsoleContainer = serialconsole.LogContainer

// ConsoleRecord is one console file: which VMI, which stream of it (the console subresource, or
// one launcher console container instance), and when it was read.
type ConsoleRecord struct {
	Pool   string `json:"pool"`
	VMI    string `json:"vmi"`
	VMIUID string `json:"vmiUID"`
	// Source is serialconsole.SourceSubresource or serialconsole.SourceLog.
	Source  string `json:"source"`
	Pod     string `json:"pod"`
	PodUID  string `json:"podUID"`
	Restart int32  `json:"restart"`
	Node    string `json:"node,omitempty"`
	Path    string `json:"path"`
	// LauncherStart is when the console container started (SourceLog); ReadStart and ReadEnd
	// bound the read.
	LauncherStart time.Time `json:"launcherStart,omitzero"`
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

// consoles writes every console stream the hub reads of a watched pool's VMI to a file of its
// own: a replaced VMI or a restarted console container gets a new file and the old one is kept.
// It is a serialconsole.Subscriber.
type consoles struct {
	rec *Recorder

	mu      sync.Mutex
	streams map[string]*consoleFile // by serialconsole.Stream.Key()
	stopped bool                    // no file opens once set
}

type consoleFile struct {
	mu  sync.Mutex
	rec ConsoleRecord
	// unreadable is why the console could not be read, until a line is read after it.
	unreadable string
	f          *File
	endOff     int64
	done       bool
}

func (c *consoles) Started(s serialconsole.Stream) {
	pn, ok := c.rec.pools.ofRef(Management, "VirtualMachineInstance", c.rec.opts.Namespace, s.VMI, s.VMIUID)
	if !ok {
		return
	}
	rec := ConsoleRecord{Pool: pn.Pool, VMI: s.VMI, VMIUID: string(s.VMIUID), Source: s.Source, Pod: s.Pod, PodUID: string(s.PodUID),
		Restart: s.Restart, Node: s.Node, LauncherStart: s.LauncherStart, ReadStart: s.Start, Path: consolePath(pn, s)}
	cf := &consoleFile{rec: rec}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.streams[s.Key()] = cf
	c.mu.Unlock()
	cf.mu.Lock()
	defer cf.mu.Unlock()
	f, err := c.rec.opts.Artifacts.Create(rec.Path, c.rec.opts.Limits.ConsoleBytes)
	if err != nil {
		cf.rec.Error = err.Error()
		return
	}
	header, off := consoleHeader(c.rec.opts.Namespace, &cf.rec)
	_, _ = f.Write(header)
	_ = f.Flush()
	cf.f, cf.endOff = f, off
}

// consolePath is a stream's file: a launcher container instance's by its Pod and restart, the
// subresource's by the launcher Pod (a VMI has one; its replacement has another).
func consolePath(pn tenant.PoolNames, s serialconsole.Stream) string {
	if s.Source == serialconsole.SourceLog {
		return fmt.Sprintf("%s/consoles/%s/%s-%d.log", poolDir(pn), s.VMI, s.Pod, s.Restart)
	}
	return fmt.Sprintf("%s/consoles/%s/%s-console.log", poolDir(pn), s.VMI, s.Pod)
}

func (c *consoles) file(s serialconsole.Stream) *consoleFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[s.Key()]
}

func (c *consoles) Line(s serialconsole.Stream, at time.Time, text string) {
	cf := c.file(s)
	if cf == nil {
		return
	}
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if cf.f == nil || cf.done || cf.rec.Truncated {
		return
	}
	if cf.rec.FirstLine.IsZero() {
		cf.rec.FirstLine = at
	}
	cf.rec.LastLine = at
	cf.rec.Lines++
	cf.unreadable = ""
	if _, err := cf.f.Write([]byte(at.UTC().Format(time.RFC3339Nano) + " " + text + "\n")); err != nil {
		if errors.Is(err, ErrLimit) {
			cf.rec.Truncated = true
			cf.rec.EndReason = fmt.Sprintf("byte bound %d reached", c.rec.opts.Limits.ConsoleBytes)
			return
		}
		cf.rec.Error = err.Error()
	}
}

func (c *consoles) Unreadable(s serialconsole.Stream, at time.Time, why string) {
	cf := c.file(s)
	if cf == nil {
		return
	}
	cf.mu.Lock()
	defer cf.mu.Unlock()
	cf.unreadable = why
	if cf.f != nil && !cf.done && !cf.rec.Truncated {
		_, _ = cf.f.Write([]byte("# " + at.UTC().Format(time.RFC3339Nano) + " cannot read: " + why + "\n"))
	}
}

func (c *consoles) Ended(s serialconsole.Stream, at time.Time, reason string) {
	if cf := c.file(s); cf != nil {
		cf.finish(at, reason)
	}
}

// finish patches the read end into the header, closes the file and keeps the record.
func (cf *consoleFile) finish(at time.Time, reason string) {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if cf.done {
		return
	}
	cf.done = true
	cf.rec.ReadEnd = at
	if cf.rec.EndReason == "" {
		cf.rec.EndReason = reason
	}
	if cf.rec.Error == "" {
		cf.rec.Error = cf.unreadable // the console never became readable again
	}
	if cf.f != nil {
		_ = cf.f.Flush()
		_ = cf.f.Patch(cf.endOff, []byte(readEndField(cf.rec.ReadEnd, cf.rec.EndReason)))
		_ = cf.f.Close()
		cf.rec.Bytes = cf.f.Size()
	}
}

// records returns every console read so far, for consoles.json and the baseline.
func (c *consoles) records() []ConsoleRecord {
	c.mu.Lock()
	files := make([]*consoleFile, 0, len(c.streams))
	for _, cf := range c.streams {
		files = append(files, cf)
	}
	c.mu.Unlock()
	out := make([]ConsoleRecord, 0, len(files))
	for _, cf := range files {
		cf.mu.Lock()
		out = append(out, cf.rec)
		cf.mu.Unlock()
	}
	return out
}

// all returns the identity of every console stream, running or finished (for collectors that
// must not read a console twice).
func (c *consoles) all() []ConsoleRecord { return c.records() }

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

// stopAll ends every file now; the hub's later calls are dropped.
func (c *consoles) stopAll(at time.Time, reason string) {
	c.mu.Lock()
	c.stopped = true
	files := make([]*consoleFile, 0, len(c.streams))
	for _, cf := range c.streams {
		files = append(files, cf)
	}
	c.mu.Unlock()
	for _, cf := range files {
		cf.finish(at, reason)
	}
}

// readEndReasonWidth is the room for why a read ended in the fixed-width header field.
const readEndReasonWidth = 200

const stampLayout = "2006-01-02T15:04:05.000000000Z07:00"

// consoleHeader is the head of a console file and the offset of its fixed-width read-end field.
func consoleHeader(namespace string, r *ConsoleRecord) ([]byte, int64) {
	var b strings.Builder
	fmt.Fprintf(&b, "# serial console of VMI %s/%s (pool %s)\n", namespace, r.VMI, r.Pool)
	fmt.Fprintf(&b, "# vmi uid: %s\n", r.VMIUID)
	if r.Source == serialconsole.SourceSubresource {
		fmt.Fprintf(&b, "# read from: the VMI's console subresource (subresources.kubevirt.io/v1 .../console); launcher pod %s (uid %s), node %s\n", r.Pod, r.PodUID, r.Node)
		b.WriteString("# what the guest printed before the read start, or while another client held the console, is not here: KubeVirt keeps no console history\n")
	} else {
		fmt.Fprintf(&b, "# launcher: pod %s (uid %s), container %s, restart %d, node %s\n", r.Pod, r.PodUID, ConsoleContainer, r.Restart, r.Node)
		fmt.Fprintf(&b, "# launcher start: %s (epoch %s seconds)\n", r.LauncherStart.UTC().Format(stampLayout), epoch(r.LauncherStart))
	}
	fmt.Fprintf(&b, "# read start:     %s (epoch %s seconds)\n", r.ReadStart.UTC().Format(stampLayout), epoch(r.ReadStart))
	b.WriteString("# read end:       ")
	off := int64(b.Len())
	b.WriteString(readEndField(time.Time{}, "still reading"))
	if r.Source == serialconsole.SourceSubresource {
		b.WriteString("\n# each line: <absolute time the line was read, RFC 3339, UTC> <the guest's own output, with its own relative stamps>\n")
	} else {
		b.WriteString("\n# each line: <absolute time the line was logged, RFC 3339, UTC> <the guest's own output, with its own relative stamps>\n")
	}
	return []byte(b.String()), off
}

// readEndField is the fixed-width read-end field: time, epoch seconds and why the read ended.
func readEndField(t time.Time, reason string) string {
	ts, ep := strings.Repeat("-", len(stampLayout)-5), "-"
	if !t.IsZero() {
		ts, ep = t.UTC().Format(stampLayout), epoch(t)
	}
	return fmt.Sprintf("%-30s (epoch %16s seconds) %-*.*s", ts, ep, readEndReasonWidth, readEndReasonWidth, reason)
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
