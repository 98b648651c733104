// Package docs holds README.md and docs/ to the code: every relative link and #anchor resolves
// (links_test.go); every knob, fault, lane, exit code and failure class the code names is listed
// in the docs, and every one the docs list is in the code (names_test.go); and the commands of
// README's first screen work as written on a fresh copy of the tracked files
// (firstscreen_test.go).
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, seen from this package.
var root = filepath.Join("..", "..")

// pages are the documents the tests hold: README.md and every docs/*.md, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		out = append(out, filepath.ToSlash(rel))
	}
	if len(out) < 2 {
		t.Fatal("docs/ holds no page")
	}
	return out
}

func read(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// line is one line of a page outside its code blocks, with its 1-based number.
type line struct {
	n    int
	text string
}

var fence = regexp.MustCompile("^\\s*(```|~~~)")

// prose returns the lines of a page outside fenced code blocks.
func prose(text string) []line {
	var out []line
	in := ""
	for i, l := range strings.Split(text, "\n") {
		if m := fence.FindStringSubmatch(l); m != nil {
			switch {
			case in == "":
				in = m[1]
				continue
			case in == m[1]:
				in = ""
				continue
			}
		}
		if in == "" {
			out = append(out, line{i + 1, l})
		}
	}
	return out
}

var (
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineLink = regexp.MustCompile(`\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
)

// anchors are the ids GitHub gives a page's headings: lower case, every character but letters,
// digits, marks, '_', '-' and spaces dropped, spaces made '-', a repeated id suffixed -1, -2, ...
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(text) {
		m := heading.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		title := inlineLink.ReplaceAllString(m[2], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r), r == '_', r == '-':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out[id+"-"+strconv.Itoa(n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out
}

// tableRows returns the cells of every row of the table whose header line starts with header,
// the header and separator left out.
func tableRows(t *testing.T, page, text, header string) [][]string {
	t.Helper()
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, header) {
			continue
		}
		var rows [][]string
		for _, r := range lines[i+2:] {
			if !strings.HasPrefix(r, "|") {
				break
			}
			rows = append(rows, cells(r))
		}
		return rows
	}
	t.Fatalf("%s has no table whose header starts %q", page, header)
	return nil
}

// cells splits a table row at the pipes that are not escaped.
func cells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(strings.TrimSuffix(row, "|"), "|")
	var out []string
	var b strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			b.WriteByte('|')
			i++
		case row[i] == '|':
			out = append(out, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(row[i])
		}
	}
	return append(out, strings.TrimSpace(b.String()))
}

var code = regexp.MustCompile("`([^`]+)`")

// codeSpans returns the text of every `code span` in s.
func codeSpans(s string) []string {
	var out []string
	for _, m := range code.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// diff returns what is in a and not in b, sorted.
func diff[T comparable](a, b map[T]bool, less func(x, y T) bool) []T {
	var out []T
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}
