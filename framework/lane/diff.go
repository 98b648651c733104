package lane

import (
	"fmt"
	"strings"
)

// Diff is a short line diff of have against want: the first lines that differ, for drift messages.
func Diff(have, want string) string {
	h, w := strings.Split(have, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(h), len(w)) && shown < 10; i++ {
		var hl, wl string
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if hl != wl {
			fmt.Fprintf(&b, "  line %d:\n    have: %s\n    want: %s\n", i+1, hl, wl)
			shown++
		}
	}
	return b.String()
}
