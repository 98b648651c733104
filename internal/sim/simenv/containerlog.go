package simenv

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// WriteContainerLog appends lines to a container log file a LogSink gave, in the CRI log format
// the kubelet (and kwok) read back for `kubectl logs`: "<RFC3339Nano> stdout F <line>".
func WriteContainerLog(path string, at time.Time, lines ...string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if err := FormatContainerLog(f, at, lines...); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// FormatContainerLog writes lines to w in the CRI log format, one entry per line.
func FormatContainerLog(w io.Writer, at time.Time, lines ...string) error {
	stamp := at.UTC().Format(time.RFC3339Nano)
	for _, l := range lines {
		for _, part := range strings.Split(strings.TrimRight(l, "\n"), "\n") {
			if _, err := fmt.Fprintf(w, "%s stdout F %s\n", stamp, part); err != nil {
				return err
			}
		}
	}
	return nil
}
