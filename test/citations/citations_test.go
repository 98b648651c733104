// Package citations checks that every upstream citation of the repository (`path:lines` in a
// Markdown page or a Go comment, at the ref its paragraph, row or comment names) still holds
// what its clause names, read from the pinned source: the module cache for Go modules (what
// make citation-modules downloads), for the git-only repositories their clones in
// E2E_CITATIONS_GIT or, where there are none (make test), their records (record_test.go).
package citations

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

func repoFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", "../..", "ls-files", "*.md", "*.go").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	return strings.Fields(string(out))
}

// minHeld is how many citations hold with every pinned module in the cache and the git-only
// sources read from their records (520 when this was written).
const minHeld = 480

// run checks every citation of units and returns the results.
func run(ts *trees, holds map[string][]string, units []unit) []result {
	var out []result
	for _, u := range units {
		near := ""
		for _, c := range cites(u) {
			r := check(ts, holds, c, near)
			if r.file != "" && r.unres == nil {
				near = r.file
			}
			out = append(out, r)
		}
	}
	return out
}

// Every citation the check can read holds what its clause names; the ones it cannot read are
// listed with the reason (run with -v). Under CI a pinned module missing from the module cache
// fails the test: the check would be vacuous for its citations.
func TestCitationsHold(t *testing.T) {
	start := time.Now()
	ts, err := newTrees("../..")
	if err != nil {
		t.Fatal(err)
	}
	holds, err := readHolds("holds.txt")
	if err != nil {
		t.Fatal(err)
	}
	units, err := repoUnits("../..", repoFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	results := run(ts, holds, units)
	used := map[string]bool{}
	held, unresolved := 0, map[string][]string{}
	var missing, notRecorded []string
	for _, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("%s: `%s` does not hold: %v", r.c.where(), r.c.text, r.err)
		case r.unres != nil:
			why := r.unres.Error()
			if errors.Is(r.unres, errMissingModule) {
				missing = append(missing, why)
			}
			if errors.Is(r.unres, errNotRecorded) {
				notRecorded = append(notRecorded, r.c.where()+" `"+r.c.text+"`: "+why)
			}
			unresolved[why] = append(unresolved[why], r.c.where()+" `"+r.c.text+"`")
		default:
			held++
		}
		if os.Getenv("E2E_CITATIONS_VERBOSE") != "" {
			t.Logf("%s `%s` [%v] %s err=%v unres=%v held by %q", r.c.where(), r.c.text, srcID(r.c), r.file, r.err, r.unres, r.anchor)
		}
		used[r.c.path+":"+rangesText(r.c.ranges)] = true
	}
	for k := range holds {
		if !used[k] {
			// Logged, not failed: a citation another change moved leaves a harmless line.
			t.Logf("holds.txt: %s is cited nowhere: remove its line", k)
		}
	}
	whys := make([]string, 0, len(unresolved))
	n := 0
	for w, cs := range unresolved {
		whys = append(whys, w)
		n += len(cs)
	}
	sort.Strings(whys)
	for _, w := range whys {
		t.Logf("unresolved (%d): %s", len(unresolved[w]), w)
		for _, c := range unresolved[w] {
			t.Logf("    %s", c)
		}
	}
	t.Logf("%d citations: %d hold, %d do not, %d unresolved, in %s", len(results), held, len(results)-held-n, n, time.Since(start).Round(time.Millisecond))
	// A floor under CI, where every pinned module is there: a change that quietly stops finding
	// or reading citations (a parser, a marker, the module cache's layout) fails here.
	if os.Getenv("CI") == "true" && held < minHeld {
		t.Errorf("only %d citations hold, fewer than %d: the check has stopped reading most of them", held, minHeld)
	}
	// Under CI a citation of a git-only source its record cannot judge fails: it would go
	// unchecked until someone with a clone ran the check.
	if os.Getenv("CI") == "true" {
		for _, n := range notRecorded {
			t.Errorf("%s", n)
		}
	}
	if ts.gitDir != "" {
		checkRecords(t, ts, holds, results)
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("pinned modules missing from the module cache, their citations unchecked: %s", strings.Join(dedupe(missing), "; "))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Log(msg)
	}
}

func dedupe(ss []string) []string {
	sort.Strings(ss)
	var out []string
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}

func srcID(c citation) string {
	if c.src == nil {
		return "-"
	}
	return c.src.id
}

// checkRecords compares each git-only source's record with what its clone gives, and writes it
// under E2E_CITATIONS_RECORD.
func checkRecords(t *testing.T, ts *trees, holds map[string][]string, results []result) {
	t.Helper()
	recs, err := recordFrom(ts, holds, results)
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range recs {
		want, file := r.text(), recordFile(id)
		got, _ := os.ReadFile(file)
		switch {
		case string(got) == want:
		case os.Getenv("E2E_CITATIONS_RECORD") != "":
			if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s from the clone of %s at %s", file, r.repo, r.commit)
		default:
			t.Errorf("%s is not what the clone of %s at %s gives: write it again (E2E_CITATIONS_RECORD=1 with E2E_CITATIONS_GIT)", file, r.repo, r.commit)
		}
	}
}
