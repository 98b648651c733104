package citations

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTrees reads testdata/modcache as the module cache: github.com/example/up@v1.0.0 has
// pkg/a.go, whose line 4 declares DoThing and line 5 logs "Starting thing %s".
func fakeTrees(t *testing.T) *trees {
	t.Helper()
	return &trees{modcache: "testdata/modcache", cache: map[string]*tree{}, missing: map[string]error{},
		pinned: map[string]bool{"github.com/example/up@v1.0.0": true}}
}

// checkOne runs the check over the citations of one Markdown row or Go file.
func checkOne(t *testing.T, ts *trees, holds map[string][]string, file, text string) []result {
	t.Helper()
	var units []unit
	if strings.HasSuffix(file, ".go") {
		us, err := goUnits(file, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		units = us
	} else {
		units = markdownUnits(file, text)
	}
	rs := run(ts, holds, units)
	if len(rs) == 0 {
		t.Fatalf("%s: no citation found in %q", file, text)
	}
	return rs
}

// A citation whose lines no longer hold the name its parentheses give fails, and says where
// the name went; the same citation at the right line holds. So do a range past the file's end,
// a file the named source does not have, a text holds.txt asks for, and a klog header whose
// line logs something else: the check cannot pass vacuously.
func TestWrongCitationIsCaught(t *testing.T) {
	const up = "| thing | `github.com/example/up` v1.0.0 "
	cases := []struct {
		name, file, text string
		holds            map[string][]string
		want             string // "" holds; else the failure says it
	}{
		{"right line", "x.md", up + "`pkg/a.go:4` (`DoThing`) |", nil, ""},
		{"drifted line", "x.md", up + "`pkg/a.go:1` (`DoThing`) |", nil, `"DoThing" is at 3,4`},
		{"past the end", "x.md", up + "`pkg/a.go:40-41` (`DoThing`) |", nil, "has 7 lines, cited 40-41"},
		{"no such file", "x.md", up + "`pkg/b.go:4` (`DoThing`) |", nil, "no file pkg/b.go"},
		{"holds.txt text", "x.md", up + "`pkg/a.go:3` (the function) |", map[string][]string{"pkg/a.go:3": {"func DoThing"}}, `"func DoThing" is at 4`},
		{"holds.txt right", "x.md", up + "`pkg/a.go:4` (the function) |", map[string][]string{"pkg/a.go:4": {"func DoThing"}}, ""},
		{"klog right", "x.go", "package x\n\n// As github.com/example/up v1.0.0 logs it.\nvar l = \"a.go:5] Starting thing one\"\n", nil, ""},
		{"klog drifted", "x.go", "package x\n\n// As github.com/example/up v1.0.0 logs it.\nvar l = \"a.go:4] Starting thing one\"\n", nil, "it is at pkg/a.go:5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range checkOne(t, fakeTrees(t), c.holds, c.file, c.text) {
				switch {
				case r.unres != nil:
					t.Errorf("%s: unresolved (%v), want it checked", r.c.text, r.unres)
				case c.want == "" && r.err != nil:
					t.Errorf("%s: %v, want it to hold", r.c.text, r.err)
				case c.want != "" && r.err == nil:
					t.Errorf("%s holds, want a failure saying %q", r.c.text, c.want)
				case c.want != "" && !strings.Contains(r.err.Error(), c.want):
					t.Errorf("%s: %v, want it to say %q", r.c.text, r.err, c.want)
				}
			}
		})
	}
}

// A sentence's names may be about another citation of it, so a range holding none of them is
// listed unresolved, never failed; and a module missing from the cache is reported as such.
func TestUnsureCitationsAreListedNotFailed(t *testing.T) {
	rs := checkOne(t, fakeTrees(t), nil, "x.md", "| thing | the function `DoThing` is `github.com/example/up` v1.0.0 `pkg/a.go:1` |")
	if rs[0].err != nil || rs[0].unres == nil {
		t.Errorf("sentence-only names: err %v, unresolved %v; want unresolved", rs[0].err, rs[0].unres)
	}
	rs = checkOne(t, fakeTrees(t), nil, "x.md", "| thing | `github.com/example/gone` v1.0.0 `pkg/a.go:4` (`DoThing`) |")
	if !errors.Is(rs[0].unres, errNotPinned) {
		t.Errorf("a module no go.sum pins: %v, want %v", rs[0].unres, errNotPinned)
	}
	ts := fakeTrees(t)
	ts.pinned["github.com/example/gone@v1.0.0"] = true
	rs = checkOne(t, ts, nil, "x.md", "| thing | `github.com/example/gone` v1.0.0 `pkg/a.go:4` (`DoThing`) |")
	if !errors.Is(rs[0].unres, errMissingModule) {
		t.Errorf("a pinned module not in the cache: %v, want %v", rs[0].unres, errMissingModule)
	}
}

// The same on a real pinned module: kubeadm's discovery message moved ten lines up is caught.
// Under CI the module must be there (make test downloads it); locally it may not be yet.
func TestWrongUpstreamCitationIsCaught(t *testing.T) {
	ts, err := newTrees("../..")
	if err != nil {
		t.Fatal(err)
	}
	k8s := shortNames["K8S"]
	if _, err := os.Stat(filepath.Join(ts.modcache, escape(k8s.module)+"@"+k8s.version)); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s@%s is not in the module cache: make citation-modules downloads it", k8s.module, k8s.version)
		}
		t.Skipf("%s@%s is not in the module cache yet: run make citation-modules", k8s.module, k8s.version)
	}
	holds := map[string][]string{
		"cmd/kubeadm/app/discovery/discovery.go:44-46": {"couldn't validate the identity of the API Server"},
		"cmd/kubeadm/app/discovery/discovery.go:34-36": {"couldn't validate the identity of the API Server"},
	}
	right := checkOne(t, ts, holds, "x.md", "| x | K8S `cmd/kubeadm/app/discovery/discovery.go:44-46` |")
	if right[0].err != nil || right[0].unres != nil {
		t.Fatalf("the right lines: err %v, unresolved %v; want them to hold", right[0].err, right[0].unres)
	}
	wrong := checkOne(t, ts, holds, "x.md", "| x | K8S `cmd/kubeadm/app/discovery/discovery.go:34-36` |")
	if wrong[0].err == nil || !strings.Contains(wrong[0].err.Error(), "is at 46") {
		t.Errorf("lines ten up: err %v, unresolved %v; want a failure saying the text is at 46", wrong[0].err, wrong[0].unres)
	}
}

// A Kamaji citation moved to the line the same code has at a later Kamaji release (deployment.go's
// KubeAPIServerImage is at 598 at 26.3.6-edge, at 601 at 26.8.2-edge) fails without a clone,
// read from the record as make test reads it; a name the record does not hold is said to need
// the record written again, not passed.
func TestMovedKamajiCitationIsCaughtFromItsRecord(t *testing.T) {
	ts, err := newTrees("../..")
	if err != nil {
		t.Fatal(err)
	}
	ts.gitDir = "" // as make test: no clones
	cases := []struct {
		name, file, text string
		want             string // "" holds; else the failure says it
		notRecorded      bool
	}{
		{"right line", "x.md", "| x | KJ `internal/builders/controlplane/deployment.go:598` (`KubeAPIServerImage`) |", "", false},
		{"the later release's line", "x.md", "| x | KJ `internal/builders/controlplane/deployment.go:601` (`KubeAPIServerImage`) |", `"KubeAPIServerImage" is at 598`, false},
		{"the later release's line, read at it", "x.md", "| x | KJ26 `internal/builders/controlplane/deployment.go:601` (`KubeAPIServerImage`) |", "", false},
		{"a comment's range moved", "x.go", "package x\n\n// It authenticates bootstrap tokens (clastix/kamaji\n// internal/builders/controlplane/deployment.go:692 (--enable-bootstrap-token-auth)).\nvar x = 1\n", `"--enable-bootstrap-token-auth" is at 735`, false},
		{"past the file's end", "x.md", "| x | KJ `internal/builders/controlplane/deployment.go:1598` (`KubeAPIServerImage`) |", "has 1187 lines", false},
		{"a name the record lacks", "x.md", "| x | KJ `internal/builders/controlplane/deployment.go:598` (`NoSuchNameRecorded`) |", "", true},
		// Prose names the record has not seen do not make a citation unresolved when the
		// record knows another name of the sentence: an edit of a page's prose needs no clone.
		{"prose the record has not seen", "x.md", "| x | its KubeAPIServerImage and NewProseName: KJ `internal/builders/controlplane/deployment.go:598` |", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := checkOne(t, ts, nil, c.file, c.text)[0]
			switch {
			case c.notRecorded:
				if !errors.Is(r.unres, errNotRecorded) {
					t.Errorf("%s: err %v, unresolved %v; want it unresolved as %v", r.c.text, r.err, r.unres, errNotRecorded)
				}
			case r.unres != nil:
				t.Errorf("%s: unresolved (%v), want it checked from record/%s.txt", r.c.text, r.unres, srcID(r.c))
			case c.want == "" && r.err != nil:
				t.Errorf("%s: %v, want it to hold", r.c.text, r.err)
			case c.want != "" && r.err == nil:
				t.Errorf("%s holds, want a failure saying %q", r.c.text, c.want)
			case c.want != "" && !strings.Contains(r.err.Error(), c.want):
				t.Errorf("%s: %v, want it to say %q", r.c.text, r.err, c.want)
			}
		})
	}
}
