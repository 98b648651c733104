package citations

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A git-only source (a repository the Go module proxy does not serve at the pinned commit:
// Kamaji's edge builds, Cozystack's main, ...) cannot be read where make test runs, which
// reaches the proxy and Debian only. What the check needs of it is recorded instead, from a
// clone, in record/<short name>.txt: the files each citation's path can name, each resolved
// file's line count, and on which lines each name a citation is held to stands (or that it
// stands on none). Without a clone the check reads the source as that record: a line range
// moved in a comment fails exactly as against the tree, and a citation that names what the
// record does not hold is unresolved (failed under CI) until the record is written again:
//
//	E2E_CITATIONS_GIT=<folder of clones named owner+name> E2E_CITATIONS_RECORD=1 go test ./test/citations
//
// With E2E_CITATIONS_GIT set and no E2E_CITATIONS_RECORD, a record that differs from what the
// clones give fails the test.

// recordDir is where the records are, relative to the package.
const recordDir = "record"

// record is what the check needs of one git-only source.
type record struct {
	id, repo, commit string
	// files are the paths citations can resolve to: the line count of those read, -1 of those
	// only listed (a path several files end in).
	files map[string]int
	// at is, per file, the lines each name stands on (none: not in the file).
	at map[string]map[string][]int
}

// errNotRecorded is a citation of a git-only source that names what its record does not hold.
var errNotRecorded = errors.New("not in the record of its git-only source")

func newRecord(s source) *record {
	return &record{id: s.id, repo: s.repo, commit: s.commit, files: map[string]int{}, at: map[string]map[string][]int{}}
}

func recordFile(id string) string { return filepath.Join(recordDir, id+".txt") }

// readRecord reads record/<id>.txt; a missing file is errNotRecorded.
func readRecord(s source) (*record, error) {
	f, err := os.Open(recordFile(s.id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: no %s: write it from a clone (E2E_CITATIONS_GIT=<clones> E2E_CITATIONS_RECORD=1 go test ./test/citations)", errNotRecorded, recordFile(s.id))
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := newRecord(s)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		fs := strings.SplitN(l, "\t", 4)
		bad := fmt.Errorf("%s:%d: want source/file/at lines separated by tabs, got %q", recordFile(s.id), n, l)
		switch {
		case fs[0] == "source" && len(fs) == 4:
			if fs[1] != s.id || fs[2] != s.repo || fs[3] != s.commit {
				return nil, fmt.Errorf("%s is of %s %s at %s, the check pins %s at %s: write it again from a clone", recordFile(s.id), fs[1], fs[2], fs[3], s.repo, s.commit)
			}
		case fs[0] == "file" && len(fs) == 3:
			c, err := strconv.Atoi(fs[2])
			if err != nil {
				return nil, bad
			}
			r.files[fs[1]] = c
		case fs[0] == "at" && len(fs) == 4:
			var ls []int
			if fs[2] != "-" {
				for _, x := range strings.Split(fs[2], ",") {
					v, err := strconv.Atoi(x)
					if err != nil {
						return nil, bad
					}
					ls = append(ls, v)
				}
			}
			r.add(fs[1], fs[3], ls)
		default:
			return nil, bad
		}
	}
	return r, sc.Err()
}

func (r *record) add(file, name string, lines []int) {
	if r.at[file] == nil {
		r.at[file] = map[string][]int{}
	}
	r.at[file][name] = lines
}

// tree is the source as the record has it: a read file's lines hold its recorded names.
func (r *record) tree(s source) *tree {
	t := &tree{src: s, files: map[string]bool{}, rec: r}
	for f := range r.files {
		t.files[f] = true
	}
	t.read = func(p string) ([]byte, error) {
		n := r.files[p]
		if n < 0 {
			return nil, fmt.Errorf("%w: %s has only its name in %s", errNotRecorded, p, recordFile(r.id))
		}
		lines := make([]string, n)
		for name, ls := range r.at[p] {
			for _, l := range ls {
				if l >= 1 && l <= n {
					lines[l-1] += "\t" + name
				}
			}
		}
		return []byte(strings.Join(lines, "\n")), nil
	}
	return t
}

// unknown is the names the record does not place in the file, either way.
func (r *record) unknown(file string, names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := r.at[file][n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

// known is the names the record places in the file, either way.
func (r *record) known(file string, names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := r.at[file][n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// text is the record as its file holds it, sorted.
func (r *record) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# What test/citations reads of %s at %s (%s), where no clone is: see record_test.go.\n", r.repo, r.commit, r.id)
	fmt.Fprintf(&b, "# Written by E2E_CITATIONS_GIT=<clones> E2E_CITATIONS_RECORD=1 go test ./test/citations; do not edit.\n")
	fmt.Fprintf(&b, "source\t%s\t%s\t%s\n", r.id, r.repo, r.commit)
	files := make([]string, 0, len(r.files))
	for f := range r.files {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		fmt.Fprintf(&b, "file\t%s\t%d\n", f, r.files[f])
		names := make([]string, 0, len(r.at[f]))
		for n := range r.at[f] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			at := "-"
			if ls := r.at[f][n]; len(ls) > 0 {
				parts := make([]string, len(ls))
				for i, l := range ls {
					parts[i] = strconv.Itoa(l)
				}
				at = strings.Join(parts, ",")
			}
			fmt.Fprintf(&b, "at\t%s\t%s\t%s\n", f, at, n)
		}
	}
	return b.String()
}

// recordFrom writes down, from the clones, what the check needs of each git-only source its
// citations name: for every citation, the files its path can name, and in the file it resolved
// to every name it could be held to (holds.txt's, its parentheses', its sentence's, its
// unit's).
func recordFrom(ts *trees, holds map[string][]string, results []result) (map[string]*record, error) {
	out := map[string]*record{}
	for _, res := range results {
		c := res.c
		if c.klog || c.src == nil || c.src.repo == "" {
			continue
		}
		s, p := staging(*c.src, c.path)
		if s.repo == "" {
			continue
		}
		t, err := ts.get(s)
		if err != nil || t.rec != nil {
			continue // no clone of it: its record stays as it is
		}
		r := out[s.id]
		if r == nil {
			r = newRecord(s)
			out[s.id] = r
		}
		for _, f := range t.names0() {
			if f == p || strings.HasSuffix(f, "/"+p) || f == "packages/apps/kubernetes/"+strings.TrimPrefix(p, "packages/apps/kubernetes/") {
				if _, ok := r.files[f]; !ok {
					r.files[f] = -1
				}
			}
		}
		if res.file == "" || !t.files[res.file] {
			continue
		}
		data, err := t.read(res.file)
		if err != nil {
			return nil, fmt.Errorf("%s: reading %s: %w", s.id, res.file, err)
		}
		lines := strings.Split(string(data), "\n")
		r.files[res.file] = len(lines)
		want := append(append(append(append([]string(nil), holds[c.path+":"+rangesText(c.ranges)]...), c.local...), c.clause...), names(c.u.text)...)
		for _, w := range want {
			if _, ok := r.at[res.file][w]; ok {
				continue
			}
			var at []int
			for i, l := range lines {
				if contains(l, w) {
					at = append(at, i+1)
				}
			}
			r.add(res.file, w, at)
		}
	}
	return out, nil
}
