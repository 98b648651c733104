package diag

import (
	"fmt"
	"strings"
	"testing"
)

// A console-like megabyte through a redactor that learned 500 Secret values (a busy
// management namespace): the cost every streamed byte pays.
func BenchmarkScrubConsoleMegabyte(b *testing.B) {
	r := NewRedactor()
	for i := 0; i < 500; i++ {
		r.Learn(fmt.Sprintf("secret-value-%04d-%s", i, strings.Repeat("k", 24)))
	}
	var sb strings.Builder
	for i := 0; sb.Len() < 1<<20; i++ {
		fmt.Fprintf(&sb, "2026-12-02T12:00:00.%09dZ [%5d.%06d] kubelet[812]: I1202 node status update key=value%d ready=true\n", i, i/1000, i%1000000, i)
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Scrub(data)
	}
}
