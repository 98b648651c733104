package serialconsole

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxLine is the longest console line kept whole; a longer run without a line end is cut into
// pieces of this size (a guest that prints a progress bar with carriage returns only).
const maxLine = 64 << 10

// Reasons a stream ends, as subscribers hear them.
const (
	// EndedTaken: the console connection was closed while the VMI still ran. KubeVirt closes a
	// VMI's console connection when another one opens (a person's `virtctl console`), or when
	// the VMI stops; the hub does not take the console back.
	EndedTaken = "the console connection was closed while the VMI ran (another client, such as virtctl console, took it, or the VMI is stopping); the harness does not take it back"
	// EndedExited: the launcher's console container exited.
	EndedExited = "the guest-console-log container exited"
)

// followSerial reads one VMI's console subresource: it dials until one connection opens, then
// reads it to its end, and never dials again.
func (h *Hub) followSerial(ctx context.Context, f *follower) {
	var conn Conn
	said := ""
	for {
		c, err := h.dial(ctx, f.s)
		if err == nil {
			conn = c
			break
		}
		if ctx.Err() != nil {
			return
		}
		if why := "console subresource: " + err.Error(); why != said {
			if said == "" {
				h.started(f)
			}
			said = why
			h.unreadable(f, why)
		}
		if !h.wait(ctx, f) {
			h.ended(f, orReason(f.why(), "the VMI stopped running before its console could be opened"))
			return
		}
	}
	if said == "" {
		h.started(f)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	err := h.scan(f, conn, func(text string) (time.Time, string) { return h.o.Now(), text })
	_ = conn.Close()
	reason := f.why()
	switch {
	case reason != "":
	case ctx.Err() != nil:
		reason = "the run stopped reading"
	case !errors.Is(err, io.EOF):
		reason = EndedTaken + ": " + err.Error()
	default:
		reason = EndedTaken
	}
	h.ended(f, reason)
}

// dial opens s's console, giving up when ctx ends even if the dialer does not.
func (h *Hub) dial(ctx context.Context, s Stream) (Conn, error) {
	type result struct {
		c   Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := h.o.Dial(ctx, h.o.Namespace, s.VMI)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				_ = r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// followLog reads one launcher console container instance from its first line, reopening the
// log after the last line read when the stream breaks, until the container exits or the hub
// ends the stream.
func (h *Hub) followLog(ctx context.Context, f *follower) {
	h.started(f)
	var last time.Time
	said := ""
	for {
		opts := &corev1.PodLogOptions{Container: LogContainer, Follow: true, Timestamps: true}
		if !last.IsZero() {
			since := metav1.NewTime(last.Add(time.Nanosecond))
			opts.SinceTime = &since
		}
		rc, err := h.o.Management.Kube.CoreV1().Pods(h.o.Namespace).GetLogs(f.s.Pod, opts).Stream(ctx)
		if err == nil {
			said = ""
			stop := context.AfterFunc(ctx, func() { _ = rc.Close() })
			err = h.scan(f, rc, func(line string) (time.Time, string) {
				if ts, text, ok := strings.Cut(line, " "); ok {
					if t, perr := time.Parse(time.RFC3339Nano, ts); perr == nil {
						last = t
						return t, text
					}
				}
				return h.o.Now(), line
			})
			stop()
			_ = rc.Close()
			if ctx.Err() == nil && errors.Is(err, io.EOF) {
				h.ended(f, orReason(f.why(), EndedExited))
				return
			}
		}
		if ctx.Err() != nil {
			h.ended(f, orReason(f.why(), "the run stopped reading"))
			return
		}
		if why := "log of " + f.s.Pod + "/" + LogContainer + ": " + err.Error(); why != said {
			said = why
			h.unreadable(f, why)
		}
		if !h.wait(ctx, f) {
			h.ended(f, orReason(f.why(), "the run stopped reading"))
			return
		}
	}
}

// scan hands every line of r to the subscribers, stamped by stamp, until r ends; it returns
// r's error (io.EOF at a clean end).
func (h *Hub) scan(f *follower, r io.Reader, stamp func(string) (time.Time, string)) error {
	br := bufio.NewReaderSize(r, maxLine)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			text := strings.TrimRight(string(chunk), "\r\n")
			at, text := stamp(text)
			h.line(f, at, text)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return err
		}
	}
}

// wait sleeps the retry interval or until the VMI or launcher changes; false when the stream
// is over.
func (h *Hub) wait(ctx context.Context, f *follower) bool {
	t := time.NewTimer(h.o.Retry)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-f.poke:
	case <-t.C:
	}
	return ctx.Err() == nil
}

func orReason(reason, otherwise string) string {
	if reason != "" {
		return reason
	}
	return otherwise
}
