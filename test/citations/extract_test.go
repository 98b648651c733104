package citations

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// unit is the text a citation is read with: a table row or a paragraph of a Markdown page, or
// a Go comment group with the code line after it.
type unit struct {
	file string
	line int
	text string
	// code is the line after a comment group: the names it declares are what the comment is about.
	code string
	// klog is a klog header in a string literal; text is then the file's comments before it.
	klog *klogCite
	// fallback is the source of a citation the unit names none for: the last one an earlier
	// comment of the same file named, or the page's rule (docs/upstream.md: "Paths without a
	// repository are in cozystack/cozystack at main"). A citation read at it is never failed.
	fallback *source
}

// lineRange is one cited range, inclusive.
type lineRange struct{ from, to int }

// citation is a path and its line ranges, with the source named before it and the names its
// clause gives.
type citation struct {
	u      unit
	src    *source // nil: the unit names none
	path   string
	ranges []lineRange
	// local are the names in the parentheses right after the citation ("`:998` (PendingPopulation)").
	local []string
	// clause are the names of the sentence the citation stands in, up to the citation.
	clause []string
	// klog: a klog header, whose file is any file of that name in the source.
	klog bool
	// alts are the sources the file names: a klog header's is the one with a file of its name.
	alts []*source
	// named: the source is named in the citation's own sentence, not only earlier in the unit.
	named bool
	text  string // as written
}

func (c citation) where() string { return c.u.file + ":" + strconv.Itoa(c.u.line) }

var (
	// A cited path ends in a known extension and is followed by :lines ("a.go:12", "a.go:12-14,
	// 20", "a.go:12, 30-31"), or by " lines 12-14" / " line 12".
	citeRe = regexp.MustCompile(`((?:[A-Za-z0-9_.@-]+/)*[A-Za-z0-9_.-]+\.(?:go|yaml|yml|sh|md|bats|tpl|json|toml|tmpl|txt))` +
		"`?" + `(?::| lines? )(\d+(?:-\d+)?(?:, ?\d+(?:-\d+)?)*)`)
	// A continuation ":998" names another range of the path cited before it.
	contRe = regexp.MustCompile("(?:^|[\\s(`])(:(\\d+(?:-\\d+)?(?:, ?\\d+(?:-\\d+)?)*))\\b")
	// tight is what may stand between a marker and the path it names: quotes, a ref.
	tight = regexp.MustCompile("^[\\s`'\"(@:]*(?:(?:v\\d+\\.\\d+\\.\\d+|main|[0-9a-f]{7,40}|\\(`?[0-9a-f]{7,40}`?\\))[\\s`,]*)*$")
	// A port, not a continuation: "binds to :8443".
	portRe = regexp.MustCompile(`\b(?:to|on|at|port|listens)\s*$`)
	parens = regexp.MustCompile(`^` + "`?" + `\s*(?:\(([^()]*)\))`)
)

func parseRanges(s string) []lineRange {
	var out []lineRange
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		a, b, ok := strings.Cut(part, "-")
		from, _ := strconv.Atoi(a)
		to := from
		if ok {
			to, _ = strconv.Atoi(b)
		}
		out = append(out, lineRange{from, to})
	}
	return out
}

// cites finds every citation of a unit, each with the source the nearest marker before it
// names (or a ref written right after it).
func cites(u unit) []citation {
	if u.klog != nil {
		return []citation{klogCitation(u)}
	}
	type hit struct {
		start, end int
		path       string
		ranges     string
	}
	var hits []hit
	for _, m := range citeRe.FindAllStringSubmatchIndex(u.text, -1) {
		hits = append(hits, hit{m[0], m[1], u.text[m[2]:m[3]], u.text[m[4]:m[5]]})
	}
	for _, m := range contRe.FindAllStringSubmatchIndex(u.text, -1) {
		start := m[2]
		inside := false
		for _, h := range hits {
			if start >= h.start && start < h.end {
				inside = true
			}
		}
		if !inside && !portRe.MatchString(u.text[:m[0]+1]) {
			hits = append(hits, hit{start, m[1], "", u.text[m[4]:m[5]]})
		}
	}
	sortHits := func() {
		for i := 1; i < len(hits); i++ {
			for j := i; j > 0 && hits[j].start < hits[j-1].start; j-- {
				hits[j], hits[j-1] = hits[j-1], hits[j]
			}
		}
	}
	sortHits()
	type mark struct {
		at, end int
		src     *source
	}
	var marks []mark
	for _, mk := range markers {
		for _, m := range mk.re.FindAllStringSubmatchIndex(u.text, -1) {
			groups := make([]string, len(m)/2)
			for i := range groups {
				if m[2*i] >= 0 {
					groups[i] = u.text[m[2*i]:m[2*i+1]]
				}
			}
			marks = append(marks, mark{m[0], m[1], mk.to(groups)})
		}
	}
	var out []citation
	prevPath, prevEnd := "", 0
	for _, h := range hits {
		c := citation{u: u, path: h.path, ranges: parseRanges(h.ranges), text: u.text[h.start:h.end]}
		if c.path == "" {
			if prevPath == "" {
				continue
			}
			c.path = prevPath
			// A marker between the path and its continuation: another source's lines.
			for _, mk := range marks {
				if mk.at > prevEnd && mk.at < h.start {
					c.path = ""
				}
			}
			if c.path == "" {
				continue
			}
		}
		prevPath, prevEnd = c.path, h.end
		best, bestEnd := -1, 0
		for _, mk := range marks {
			if mk.at < h.start && mk.at > best {
				best, bestEnd, c.src = mk.at, mk.end, mk.src
			}
		}
		// Named: the marker stands right before the path (`KJ path`, `module vX path`).
		c.named = best >= 0 && bestEnd <= h.start && tight.MatchString(u.text[bestEnd:h.start])
		if c.src == nil && u.fallback != nil {
			c.src = u.fallback
		}
		rest := u.text[h.end:]
		if m := after.FindStringSubmatch(rest); m != nil {
			s := shortNames[afterSource[m[1]]]
			c.src = &s
		}
		if m := parens.FindStringSubmatch(rest); m != nil {
			c.local = names(m[1])
			// A short parenthesis is a name by itself: "(Always)", "(Failed)", "(hostname)".
			if ws := strings.Fields(m[1]); len(ws) <= 2 && len(c.local) == 0 {
				for _, w := range ws {
					if w = strings.Trim(w, ",.;:`\"'"); len(w) >= 4 {
						c.local = append(c.local, w)
					}
				}
			}
		}

		c.clause = names(sentence(u.text, h.start, h.end))
		out = append(out, c)
	}
	return out
}

// markdownUnits splits a page into table rows and paragraphs (fenced blocks left out).
func markdownUnits(file string, data string) []unit {
	var out []unit
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, unit{file: file, line: start, text: strings.Join(cur, " ")})
		}
		cur = nil
	}
	fenced := false
	for i, l := range strings.Split(data, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "```"):
			flush()
			fenced = !fenced
		case fenced:
		case t == "":
			flush()
		case strings.HasPrefix(t, "|"):
			flush()
			out = append(out, unit{file: file, line: i + 1, text: t})
		default:
			if strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "#") {
				flush()
			}
			if len(cur) == 0 {
				start = i + 1
			}
			cur = append(cur, t)
		}
	}
	flush()
	return out
}

// goUnits is every comment group of a Go file, with the source line after it.
func goUnits(file string, src []byte) ([]unit, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(src), "\n")
	var out []unit
	var last *source
	for _, g := range f.Comments {
		var parts []string
		for _, c := range g.List {
			parts = append(parts, strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*")))
		}
		u := unit{file: file, line: fset.Position(g.Pos()).Line, text: strings.Join(parts, " "), fallback: last}
		if l := lastMarker(u.text); l != nil {
			last = l
		}
		end := fset.Position(g.End()).Line
		if end < len(lines) {
			u.code = lines[end] // the line after the group (lines is 0-based)
		}
		// A trailing comment is about its own line.
		if p := fset.Position(g.Pos()); p.Column > 1 && strings.TrimSpace(lines[p.Line-1][:p.Column-1]) != "" {
			u.code = lines[p.Line-1][:p.Column-1]
		}
		out = append(out, u)
	}
	out = append(out, klogUnits(file, src, f, fset)...)
	return out, nil
}

// klogLine is a klog header the sim writes as upstream's process would: "importer.go:106]
// Starting importer" says line 106 of a file importer.go logs "Starting importer".
var klogLine = regexp.MustCompile(`^"([A-Za-z0-9_.-]+\.go):(\d+)\] ([^"%']*)`)

// klogUnits are the klog headers in a Go file's string literals, each a unit of its own whose
// source is the last one the file's comments named before it.
func klogUnits(file string, src []byte, f *ast.File, fset *token.FileSet) []unit {
	var out []unit
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		m := klogLine.FindStringSubmatch(lit.Value)
		if m == nil {
			return true
		}
		before := ""
		for _, g := range f.Comments {
			if g.Pos() < lit.Pos() {
				before += " " + g.Text()
			}
		}
		out = append(out, unit{file: file, line: fset.Position(lit.Pos()).Line, text: before, klog: &klogCite{file: m[1], line: atoi(m[2]), text: strings.TrimSpace(m[3])}})
		return true
	})
	return out
}

type klogCite struct {
	file string
	line int
	text string
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// repoUnits reads every Markdown page and Go file of the repository but the check's own.
func repoUnits(root string, files []string) ([]unit, error) {
	var out []unit
	for _, f := range files {
		if strings.HasPrefix(f, "test/citations/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		switch filepath.Ext(f) {
		case ".md":
			us := markdownUnits(f, string(data))
			if id, ok := pageSource[f]; ok {
				src := shortNames[id]
				for i := range us {
					us[i].fallback = &src
				}
			}
			out = append(out, us...)
		case ".go":
			us, err := goUnits(f, data)
			if err != nil {
				return nil, err
			}
			out = append(out, us...)
		}
	}
	return out, nil
}

var sentenceEnd = regexp.MustCompile(`\.\s+[A-Z(]|;\s|\s\|\s|:\s`)

// sentence is the text of the sentence (or table cell) around [start, end): from the previous
// sentence end to the next.
func sentence(text string, start, end int) string {
	from := sentenceStart(text, start)
	to := len(text)
	if m := sentenceEnd.FindStringIndex(text[end:]); m != nil {
		to = end + m[0]
	}
	return text[from:to]
}

func sentenceStart(text string, start int) int {
	from := 0
	for _, m := range sentenceEnd.FindAllStringIndex(text[:start], -1) {
		from = m[0] + 1
	}
	return from
}

// klogCitation is the citation a klog header makes, at the source the file last named.
func klogCitation(u unit) citation {
	c := citation{u: u, path: u.klog.file, ranges: []lineRange{{u.klog.line, u.klog.line}},
		text: fmt.Sprintf("%s:%d] %s", u.klog.file, u.klog.line, u.klog.text), named: true, klog: true}
	for _, mk := range markers {
		for _, m := range mk.re.FindAllStringSubmatch(u.text, -1) {
			c.alts = append(c.alts, mk.to(m))
		}
	}
	if len(c.alts) > 0 {
		c.src = c.alts[0]
	}
	if u.klog.text != "" {
		c.local = []string{u.klog.text}
	}
	return c
}

// lastMarker is the source the last marker of a text names.
func lastMarker(text string) *source {
	best := -1
	var out *source
	for _, mk := range markers {
		for _, m := range mk.re.FindAllStringSubmatchIndex(text, -1) {
			if m[0] > best {
				groups := make([]string, len(m)/2)
				for i := range groups {
					if m[2*i] >= 0 {
						groups[i] = text[m[2*i]:m[2*i+1]]
					}
				}
				best, out = m[0], mk.to(groups)
			}
		}
	}
	return out
}

// pageSource is a page's rule for the citations that name no repository.
var pageSource = map[string]string{"docs/upstream.md": "COZY"}
