package simenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestContainerLogLinesAreCRIFormatted(t *testing.T) {
	var b strings.Builder
	at := time.Date(2026, 12, 2, 12, 0, 0, 5, time.UTC)
	if err := FormatContainerLog(&b, at, "one", "two\nthree\n"); err != nil {
		t.Fatal(err)
	}
	want := "2026-12-02T12:00:00.000000005Z stdout F one\n" +
		"2026-12-02T12:00:00.000000005Z stdout F two\n" +
		"2026-12-02T12:00:00.000000005Z stdout F three\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// A restart keeps what the last instance wrote as the previous log and starts the current one
// empty, as the kubelet does for `kubectl logs --previous`; a second restart replaces it.
func TestRestartContainerLogKeepsTheLastInstance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "importer.log")
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for i, line := range []string{"first: 401 Unauthorized", "second: 401 Unauthorized"} {
		if err := WriteContainerLog(path, at, line); err != nil {
			t.Fatal(err)
		}
		if err := RestartContainerLog(path); err != nil {
			t.Fatalf("restart %d: %v", i+1, err)
		}
		cur, err := os.ReadFile(path)
		if err != nil || len(cur) != 0 {
			t.Fatalf("restart %d: current log %q (%v), want empty", i+1, cur, err)
		}
		prev, err := os.ReadFile(path + PreviousLogSuffix)
		if err != nil || !strings.HasSuffix(string(prev), " stdout F "+line+"\n") || strings.Count(string(prev), "\n") != 1 {
			t.Fatalf("restart %d: previous log %q (%v), want the line %q alone", i+1, prev, err, line)
		}
	}
}
