package simenv

import (
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
