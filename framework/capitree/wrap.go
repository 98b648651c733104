package capitree

import (
	"strings"
	"unicode/utf8"
)

// messageWidth is the widest a MESSAGE line gets before clusterctl v1.13.6 breaks it.
const messageWidth = 100

// wrapMessage breaks a condition message into the lines the MESSAGE column shows, as clusterctl
// v1.13.6 was seen to: every line of the message on its own, runs of blanks inside a line
// squeezed to one, words packed while the line (its indentation included) stays within width.
// A line keeps its indentation, and the lines it wraps onto get it too, two more under a "* "
// bullet, so they hang under the bullet's text. A word too long for any line gets a line of its
// own, after the (then empty) line it could not join. Widths count characters.
func wrapMessage(msg string, width int) []string {
	if msg == "" {
		return nil
	}
	var out []string
	for _, line := range strings.Split(msg, "\n") {
		words := strings.Fields(line)
		lead := strings.Repeat(" ", len(line)-len(strings.TrimLeft(line, " ")))
		hang := lead
		if len(words) > 0 && words[0] == "*" {
			hang += "  "
		}
		cur, empty := lead, true
		for _, w := range words {
			sep := " "
			if empty {
				sep = ""
			}
			if utf8.RuneCountInString(cur+sep+w) <= width {
				cur, empty = cur+sep+w, false
				continue
			}
			out = append(out, cur)
			cur, empty = hang+w, false
		}
		out = append(out, cur)
	}
	return out
}
