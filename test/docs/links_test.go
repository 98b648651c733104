package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	external = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// Every relative link in README.md and docs/*.md names a file or folder of the repository, and
// every #anchor a heading of the page it points into.
func TestLinksAndAnchorsResolve(t *testing.T) {
	ids := map[string]map[string]bool{}
	idsOf := func(rel string) map[string]bool {
		if ids[rel] == nil {
			ids[rel] = anchors(read(t, rel))
		}
		return ids[rel]
	}
	checked := 0
	for _, page := range pages(t) {
		for _, l := range prose(read(t, page)) {
			for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(l.text, ""), -1) {
				target := m[2]
				if external.MatchString(target) {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = path.Clean(path.Join(path.Dir(page), file))
					if strings.HasPrefix(dest, "../") {
						t.Errorf("%s:%d: link %q leaves the repository", page, l.n, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", page, l.n, target, dest)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into %s, which has no headings", page, l.n, target, dest)
					continue
				}
				if !idsOf(dest)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with the id %q", page, l.n, target, dest, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found in README.md or docs/: the link parser reads nothing")
	}
}

// The anchor ids are GitHub's, including its treatment of punctuation, code and repeats.
func TestAnchorsAreGitHubs(t *testing.T) {
	got := anchors("# Knobs\n## Orchestrator → suite (environment of the suite process)\n```\n# not a heading\n```\n" +
		"## `E2E_KEEP` and [links](x.md)\n## CI run, cold\n## Faults\n### Faults\n")
	for _, want := range []string{"knobs", "orchestrator--suite-environment-of-the-suite-process", "e2e_keep-and-links",
		"ci-run-cold", "faults", "faults-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line of a code block was read as a heading")
	}
}
