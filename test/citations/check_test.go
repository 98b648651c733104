package citations

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

var (
	quoted = regexp.MustCompile("`([^`]+)`|\"([^\"]{3,})\"")
	// An identifier reads as code when it is camelCase, has an underscore or a digit after a
	// letter, or is written pkg.Name: plain words of prose are no anchor.
	ident = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	camel = regexp.MustCompile(`^[a-z]+[A-Z]|^[A-Z][a-z0-9]+[A-Z]|_`)
	// The harness's own names (join.detectMachine, tenant.(Names).Release) and module paths
	// are no text of upstream's.
	harness     = regexp.MustCompile(`\b(?:join|tenant|osfamily|console|diag|lane|specs|fixture|install|upstream|sim|world|kind|registry|lanes|platform|names|capacity|kubevirt|cdi|kamaji|bootstrap|guest|lifecycle|faults|fluxrelease|pkg|testing)\.\(?[A-Za-z_]+\)?(?:\.[A-Za-z_]+)*`)
	noise       = regexp.MustCompile(`^(?:[a-z0-9-]+\.)+(?:io|com|org|sh|dev)/|^[A-Za-z0-9_./-]+\.(?:go|yaml|yml|md|sh|json|tpl)$|^(?:internal|framework|specs|suites|test|cmd)/`)
	placeholder = regexp.MustCompile(`<[^>]*>|%[a-z]|\[\^?[^\]]*\][+*]?|[\\^$|?*+(){}]|\.\.\.|…`)
)

// names are the anchors a clause gives: each backticked or double-quoted text (cut at
// placeholders such as <name>, %s and regular-expression syntax, fragments of 4 characters or
// more), and each identifier that reads as code (camelCase, snake_case; pkg.Name gives Name).
func names(text string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(strings.Trim(strings.TrimSpace(s), `"'.,:;`))
		if noise.MatchString(s) {
			return
		}
		if len(s) >= 4 && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, m := range quoted.FindAllStringSubmatch(text, -1) {
		q := m[1] + m[2]
		if citeRe.MatchString(q) || strings.HasPrefix(q, ":") {
			continue // a citation, not a name
		}
		if harness.MatchString(q) {
			continue // the harness's own name
		}
		for _, frag := range placeholder.Split(q, -1) {
			add(frag)
		}
	}
	for _, w := range ident.FindAllString(harness.ReplaceAllString(quoted.ReplaceAllString(text, " "), " "), -1) {
		if camel.MatchString(w) {
			add(w)
		}
	}
	return out
}

// holds reads test/citations/holds.txt: for a citation whose clause names nothing its lines
// hold, the text they must hold. A line is `<path>:<lines> <text>`, path as the citation
// writes it; # starts a comment.
func readHolds(file string) (map[string][]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		key, text, ok := strings.Cut(l, " ")
		if !ok || strings.TrimSpace(text) == "" {
			return nil, fmt.Errorf("%s:%d: want `<path>:<lines> <text>`, got %q", file, n, l)
		}
		out[key] = append(out[key], strings.TrimSpace(text))
	}
	return out, sc.Err()
}

// result is what the check made of one citation.
type result struct {
	c      citation
	file   string // resolved path in the source
	err    error  // it does not hold
	unres  error  // it could not be read
	anchor string // what it was held to
}

// staging maps a path under a monorepo's staging folder to the module published from it.
func staging(s source, p string) (source, string) {
	for _, pre := range []string{"staging/src/k8s.io/", "staging/src/kubevirt.io/"} {
		rest, ok := strings.CutPrefix(p, pre)
		if !ok {
			continue
		}
		mod, sub, _ := strings.Cut(rest, "/")
		v := s.version
		if strings.HasPrefix(pre, "staging/src/k8s.io/") {
			v = "v0" + strings.TrimPrefix(v, "v1")
		}
		return *moduleSource(strings.TrimSuffix(pre[len("staging/src/"):], "/")+"/"+mod, v), sub
	}
	return s, p
}

// check resolves one citation and says whether each of its ranges holds a name of its clause
// (the parentheses right after it first, else the whole unit), or the text holds.txt gives.
func check(ts *trees, holds map[string][]string, c citation, near string) result {
	r := result{c: c}
	if c.klog {
		return checkKlog(ts, c)
	}
	if c.src == nil {
		r.unres = errors.New("no source named in its paragraph, row or comment")
		return r
	}
	src, p := staging(*c.src, c.path)
	t, err := ts.get(src)
	if err != nil {
		r.unres = fmt.Errorf("%s: %w", src.id, err)
		return r
	}

	file, err := t.find(p, near)
	guessed := errors.Is(err, errGuessed)
	if guessed {
		err = nil
	}
	if err != nil {
		if errors.Is(err, errAmbiguous) || !c.named {
			r.unres = fmt.Errorf("%s: %w", src.id, err)
		} else {
			r.file = p
			r.err = fmt.Errorf("%s@%s: %w", src.id, src.version, err)
		}
		return r
	}
	r.file = file
	data, err := t.read(file)
	if err != nil {
		r.unres = fmt.Errorf("%s: reading %s: %w", src.id, file, err)
		return r
	}
	lines := strings.Split(string(data), "\n")
	var want []string
	var from string
	weak := false
	switch {
	case len(holds[c.path+":"+rangesText(c.ranges)]) > 0:
		want, from = holds[c.path+":"+rangesText(c.ranges)], "holds.txt"
	case len(c.local) > 0:
		want, from = c.local, "the parentheses after it"
	case len(c.clause) > 0:
		// The names of the sentence may be about another citation of it, or generic (the
		// project's own name): a range that holds none is listed unresolved, not failed.
		want, from = c.clause, "its sentence"
		weak = true
	default:
		// Only the unit's names: they may be about another citation of it, so a range that
		// holds none of them is unresolved, not wrong.
		want, from = names(c.u.text), "its "+kind(c.u)
		weak = true
	}
	if len(want) == 0 {
		r.unres = fmt.Errorf("%s: its %s names nothing to find in the lines: add the text to test/citations/holds.txt", src.id, kind(c.u))
		return r
	}
	explicit := from == "holds.txt"
	// A path guessed from its neighbour, or a source named further back than right before
	// it, is not sure enough to fail on.
	weak = !explicit && (weak || guessed || !c.named)
	if t.rec != nil {
		// A record knows the names its citations gave when it was written. One a citation
		// is held to must be there (under CI a missing one fails); of the names its prose
		// gives, those the record knows are enough to be unsure with.
		miss := t.rec.unknown(file, want)
		switch {
		case len(miss) > 0 && !weak:
			r.unres = fmt.Errorf("%s: %w: %s does not say where %s stand in %s: write it again from a clone", src.id, errNotRecorded, recordFile(src.id), quoteAll(miss), file)
			return r
		case len(miss) == len(want):
			r.unres = fmt.Errorf("%s: %s records none of %s for %s: write it again from a clone to check it", src.id, recordFile(src.id), quoteAll(want), file)
			return r
		case len(miss) > 0:
			want = t.rec.known(file, want)
		}
	}
	heldOnce := false
	for _, rg := range c.ranges {
		if rg.from < 1 || rg.to < rg.from || rg.to > len(lines) {
			r.err = fmt.Errorf("%s@%s %s has %d lines, cited %d-%d", src.id, src.version, file, len(lines), rg.from, rg.to)
			if weak {
				r.unres, r.err = fmt.Errorf("%s: %w (the source is named only further back: say it before the path)", src.id, r.err), nil
			}
			return r
		}
		body := strings.Join(lines[rg.from-1:rg.to], "\n")
		found := ""
		for _, w := range want {
			if contains(body, w) {
				found = w
				break
			}
		}
		if found == "" && !explicit && len(c.ranges) > 1 {
			// One clause for several ranges names what one of them holds: the others are
			// held to nothing (holds.txt can name a text every range holds).
			continue
		}
		if found == "" {
			// A name of the clause elsewhere in the file: the lines moved. None anywhere: the
			// clause names nothing of the file, so this check cannot tell.
			elsewhere := where(lines, want)
			if len(elsewhere) == 0 || weak {
				r.unres = fmt.Errorf("%s: its %s names nothing %s holds (none of %s): add what the lines hold to test/citations/holds.txt", src.id, kind(c.u), file, quoteAll(want))
				return r
			}
			r.err = fmt.Errorf("%s@%s %s:%d-%d holds none of %s (from %s); %s", src.id, src.version, file, rg.from, rg.to, quoteAll(want), from, strings.Join(elsewhere, ", "))
			return r
		}
		r.anchor = found
		heldOnce = true
	}
	if !heldOnce {
		r.err = fmt.Errorf("%s@%s %s: no range of %s holds any of %s (from %s)", src.id, src.version, file, rangesText(c.ranges), quoteAll(want), from)
		if weak {
			r.unres, r.err = fmt.Errorf("%s: its %s names nothing the lines hold (none of %s): add what they hold to test/citations/holds.txt", src.id, kind(c.u), quoteAll(want)), nil
		}
	}
	return r
}

// contains matches an identifier exactly and words of prose in any case.
func contains(body, w string) bool {
	if strings.Contains(w, " ") {
		return strings.Contains(strings.ToLower(body), strings.ToLower(w))
	}
	return strings.Contains(body, w)
}

func kind(u unit) string {
	if strings.HasSuffix(u.file, ".go") {
		return "comment"
	}
	if strings.HasPrefix(u.text, "|") {
		return "row"
	}
	return "paragraph"
}

func rangesText(rs []lineRange) string {
	var parts []string
	for _, r := range rs {
		if r.from == r.to {
			parts = append(parts, fmt.Sprint(r.from))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.from, r.to))
		}
	}
	return strings.Join(parts, ",")
}

func quoteAll(ws []string) string {
	if len(ws) > 6 {
		return fmt.Sprintf("%q and %d more", ws[:6], len(ws)-6)
	}
	return fmt.Sprintf("%q", ws)
}

// specific is how many lines of a file a name may be on and still say where cited lines went.
const specific = 5

// where says on which lines of the file each name is, the first few.
func where(lines []string, want []string) []string {
	var out []string
	for _, w := range want {
		var at []string
		for i, l := range lines {
			if contains(l, w) {
				at = append(at, fmt.Sprint(i+1))
			}
		}
		// A name on many lines of the file (the project's own name, its main kind) says
		// nothing of where the cited lines went.
		if len(at) > 0 && len(at) <= specific {
			out = append(out, fmt.Sprintf("%q is at %s", w, strings.Join(at, ",")))
		}
	}
	return out
}

// checkKlog holds a klog header to its source: some file of that name has the message on that
// line (klog prints the file's base name only).
func checkKlog(ts *trees, c citation) result {
	r := result{c: c, file: c.path}
	var t *tree
	for _, s := range c.alts {
		if tt, err := ts.get(*s); err == nil && tt.rec == nil && tt.has(c.path) {
			t = tt
			break
		}
	}
	if t == nil {
		r.unres = fmt.Errorf("no source the file names has a file %s", c.path)
		return r
	}
	want, line := "", c.ranges[0].from
	if len(c.local) > 0 {
		want = c.local[0]
	}
	var seen []string
	for _, f := range t.names0() {
		if f != c.path && !strings.HasSuffix(f, "/"+c.path) {
			continue
		}
		data, err := t.read(f)
		if err != nil {
			r.unres = err
			return r
		}
		lines := strings.Split(string(data), "\n")
		if line <= len(lines) && logs(lines[line-1], want) {
			r.file, r.anchor = f, want
			return r
		}
		for i, l := range lines {
			if logs(l, want) {
				seen = append(seen, fmt.Sprintf("%s:%d", f, i+1))
			}
		}
	}
	if len(seen) == 0 && want != "" {
		r.unres = fmt.Errorf("%s: no file %s logs %q", t.src.id, c.path, want)
		return r
	}
	r.err = fmt.Errorf("%s@%s: line %d of no %s logs %q; it is at %s", t.src.id, t.src.version, line, c.path, want, strings.Join(seen, ", "))
	return r
}

// has says whether the tree has a file of that name.
func (t *tree) has(name string) bool {
	for _, f := range t.names0() {
		if f == name || strings.HasSuffix(f, "/"+name) {
			return true
		}
	}
	return false
}

var (
	goString = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	verb     = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)
)

// logs says whether a line of Go logs the message: one of its string literals, up to its
// first format verb, begins the message (or the message begins it: "New phase: %s" logs
// "New phase: Resize").
func logs(line, msg string) bool {
	if !strings.Contains(line, "klog.") {
		return false
	}
	if msg == "" {
		return true // a message built at run time: the line must log, whatever it says
	}
	for _, m := range goString.FindAllStringSubmatch(line, -1) {
		fixed := m[1]
		if loc := verb.FindStringIndex(fixed); loc != nil {
			fixed = fixed[:loc[0]]
		}
		fixed = strings.TrimSpace(fixed)
		if len(fixed) >= 4 && (strings.HasPrefix(msg, fixed) || strings.HasPrefix(fixed, msg)) {
			return true
		}
	}
	return false
}
