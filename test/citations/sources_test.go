package citations

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// source is one pinned upstream tree a citation can name: a Go module at a version (found in the
// module cache, where the tools modules and build.sh put it), or a git commit of a repository
// the proxy does not serve (read from a clone when E2E_CITATIONS_GIT names a folder of bare
// clones, else from its record, record_test.go).
type source struct {
	id      string // the docs' short name, or module@version
	module  string // Go module path, when it is one
	version string
	repo    string // owner/name on GitHub, for a git-only source
	commit  string
	fetch   string // what to run when the module is missing
}

// The short names the docs define (docs/signals.md "How to read the tables" and "Pool
// lifecycle", docs/upstream.md "Revisions read"), each at the ref the legend pins.
var shortNames = map[string]source{
	"K8S":     {module: "k8s.io/kubernetes", version: "v1.35.4", fetch: "make citation-modules"},
	"KV":      {module: "kubevirt.io/kubevirt", version: "v1.8.4", fetch: "make citation-modules"},
	"CDI":     {module: "kubevirt.io/containerized-data-importer", version: "v1.64.0", fetch: "make citation-modules"},
	"CAPK":    {module: "sigs.k8s.io/cluster-api-provider-kubevirt", version: "v0.1.10", fetch: "make citation-modules"},
	"CAPI136": {module: "sigs.k8s.io/cluster-api", version: "v1.13.6", fetch: "make citation-modules"},
	"CABPT":   {module: "github.com/siderolabs/cluster-api-bootstrap-provider-talos", version: "v0.6.12", fetch: "make citation-modules"},
	"COZY161": {module: "github.com/cozystack/cozystack", version: "v1.6.1", fetch: "make citation-modules"},
	"HCAPI":   {module: "github.com/fluxcd/helm-controller/api", version: "v1.6.2", fetch: "make citation-modules"},
	"KWOK":    {module: "sigs.k8s.io/kwok", version: "v0.8.0", fetch: "make citation-modules"},
	// v1.13.5 is the tag at 30be34da2ba56735e128c280370df3135d048015 (docs/upstream.md, "Revisions read").
	"CAPI":    {module: "sigs.k8s.io/cluster-api", version: "v1.13.5", fetch: "make citation-modules"},
	"COZY":    {repo: "cozystack/cozystack", commit: "3c780acd417f086f8f18d040d0d7020ff55d3ba3", version: "main"},
	"COZY162": {repo: "cozystack/cozystack", commit: "bfde94fd26d35c5f0281a1285f194e7ca3041b6a", version: "v1.6.2"},
	"KJ":      {repo: "clastix/kamaji", commit: "e51909fae3f5221b14c83413aaa5df07b64d3336", version: "26.3.6-edge"},
	"KJ26":    {repo: "clastix/kamaji", commit: "ddbabd87ed0e8d7c319414383e153c46f21733a9", version: "26.8.2-edge"},
	"KCP":     {repo: "clastix/cluster-api-control-plane-provider-kamaji", commit: "c476f8579a", version: "v0.19.0"},
	// v1.13.6 is the tag at 04318854eb.
	"TALOS":  {module: "github.com/siderolabs/talos", version: "v1.13.6", fetch: "make citation-modules"},
	"KAIROS": {repo: "kairos-io/cluster-api-provider-kairos", commit: "c3002363da", version: "main"},
	"HC":     {repo: "fluxcd/helm-controller", commit: "c618784259", version: "v1.5.0"},
	"KIND":   {module: "sigs.k8s.io/kind", version: "v0.33.0", fetch: "make citation-modules"},
	// kind's site (its own Go module, which the proxy does not serve) at the snapshot
	// docs/upstream.md read.
	"KINDGIT": {repo: "kubernetes-sigs/kind", commit: "fed268827e21ca48a74c38215c316dd343364ef5", version: "fed268827e21"},
	// MetalLB as Cozystack v1.6.1 ships it (the vendored chart's appVersion, its images built
	// FROM quay.io/metallb/speaker at that version).
	"METALLB": {module: "go.universe.tf/metallb", version: "v0.16.1", fetch: "make citation-modules"},
	// Not a tree: cozystack/cozystack#4911 is cited for its description.
	"#4911": {},
}

func init() {
	for id, s := range shortNames {
		s.id = id
		shortNames[id] = s
	}
}

// marker is how a unit of text names the source of the citations after it.
type marker struct {
	re *regexp.Regexp
	// to turns a match into a source; nil when the match names no tree this check reads.
	to func(m []string) *source
}

func short(id string) func([]string) *source {
	return func([]string) *source { s := shortNames[id]; return &s }
}

// moduleSource is a module named with its version in the text (`k8s.io/apiserver` v0.35.4,
// sigs.k8s.io/cluster-api v1.13.6, kubevirt.io/api v1.9.0): a pinned module of its own. The
// modules the short names stand for map to them.
func moduleSource(mod, version string) *source {
	for _, s := range shortNames {
		if s.module == mod && s.version == version {
			return &s
		}
	}
	return &source{id: mod, module: mod, version: version,
		fetch: "make citation-modules" + mod + "@" + version + " in the tools module that pins it"}
}

// The markers, in no order: the one that starts nearest before a citation names its source.
var markers = []marker{
	{regexp.MustCompile(`\b(K8S|KV|CDI|CAPK|CAPI136|CAPI|CABPT|COZY161|COZY162|COZY|HCAPI|HC|KWOK|KJ26|KJ|KCP|TALOS|KAIROS)\b`), func(m []string) *source { s := shortNames[m[1]]; return &s }},
	{regexp.MustCompile(`#4911\b`), short("#4911")},
	{regexp.MustCompile("`?((?:k8s\\.io|sigs\\.k8s\\.io|kubevirt\\.io|github\\.com|helm\\.sh)/[A-Za-z0-9._/-]*[A-Za-z0-9])`?(?:@|\\s+)(v\\d+\\.\\d+\\.\\d+)\\b"), func(m []string) *source { return moduleSource(m[1], m[2]) }},
	{regexp.MustCompile("`(k8s\\.io/(?:api|apimachinery|apiserver|client-go|component-helpers|cloud-provider|kubelet|component-base))`"), func(m []string) *source { return moduleSource(m[1], "v0.35.4") }},
	{regexp.MustCompile(`\b(?:kubevirt/)?containerized-data-importer v1\.64\.0\b`), short("CDI")},
	{regexp.MustCompile(`\bkubevirt/kubevirt v1\.8\.4\b`), short("KV")},
	{regexp.MustCompile(`\bkubevirt/kubevirt [0-9a-f]{7,}\b`), func([]string) *source { return &source{id: "kubevirt/kubevirt at a commit no legend pins"} }},
	{regexp.MustCompile(`\bCDI v1\.64\.0\b`), short("CDI")},
	{regexp.MustCompile(`\b(?:[Kk]ubernetes|k8s) v1\.35\.4\b`), short("K8S")},
	{regexp.MustCompile(`\bcluster-api-provider-kubevirt v0\.1\.10\b|\bCAPK v0\.1\.10\b`), short("CAPK")},
	{regexp.MustCompile(`\bcluster-api-bootstrap-provider-talos v0\.6\.12\b`), short("CABPT")},
	{regexp.MustCompile(`\bclastix/kamaji 26\.8\.2-edge\b`), short("KJ26")},
	{regexp.MustCompile(`\bclastix/kamaji\b(?: 26\.3\.6-edge)?`), short("KJ")},
	{regexp.MustCompile(`\bcluster-api-control-plane-provider-kamaji\b`), short("KCP")},
	{regexp.MustCompile(`\bcluster-api-provider-kairos\b`), short("KAIROS")},
	{regexp.MustCompile(`\b[Cc]ozystack v1\.6\.1\b`), short("COZY161")},
	{regexp.MustCompile(`\b[Cc]ozystack v1\.6\.2\b`), short("COZY162")},
	{regexp.MustCompile(`\bcozystack/cozystack\b`), short("COZY")},
	{regexp.MustCompile(`\bkind v0\.33\.0\b`), short("KIND")},
	{regexp.MustCompile(`\bkind snapshot(?: HEAD)?\b`), short("KINDGIT")},
	{regexp.MustCompile(`\b(?:metallb/metallb|go\.universe\.tf/metallb|MetalLB) v0\.16\.1\b`), short("METALLB")},
	{regexp.MustCompile(`\b(?:siderolabs/)?[Tt]alos v1\.13\.6\b`), short("TALOS")},
	{regexp.MustCompile(`\b(?:kubernetes-sigs/)?cluster-api v1\.13\.5\b`), short("CAPI")},
	{regexp.MustCompile(`\b(?:fluxcd/)?helm-controller v1\.5\.0\b`), short("HC")},
	{regexp.MustCompile(`\b(?:fluxcd/)?helm-controller v1\.6\.2\b`), func([]string) *source { return moduleSource("github.com/fluxcd/helm-controller", "v1.6.2") }},
}

// after is a ref written after a citation ("markcontrolplane.go:31-34 at v1.35.4", the path in
// backticks or not): it names the citation's source when no marker precedes it in the same
// clause.
var after = regexp.MustCompile("^`?[),]?\\s*(?:at|in) (v1\\.35\\.4|v0\\.33\\.0|v1\\.6\\.1|v1\\.6\\.2|main)\\b")

var afterSource = map[string]string{"v1.35.4": "K8S", "v0.33.0": "KIND", "v1.6.1": "COZY161", "v1.6.2": "COZY162", "main": "COZY"}

// tree is a resolved source: its files by path, and how to read one.
type tree struct {
	src   source
	files map[string]bool
	read  func(path string) ([]byte, error)
	// bySuffix lists the files whose path ends in a key ("/cluster.yaml" → its paths).
	names []string
	// rec is the record a git-only source is read from where no clone is; nil for a tree.
	rec *record
}

// trees finds sources in the module cache; git-only ones in E2E_CITATIONS_GIT, else in their
// records.
type trees struct {
	modcache string
	gitDir   string
	cache    map[string]*tree
	missing  map[string]error // source id@version → why
	pinned   map[string]bool  // module@version a go.sum of the repository or build.sh pins
}

func newTrees(root string) (*trees, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	ts := &trees{modcache: strings.TrimSpace(string(out)), gitDir: os.Getenv("E2E_CITATIONS_GIT"),
		cache: map[string]*tree{}, missing: map[string]error{}, pinned: map[string]bool{}}
	// The modules the short names stand for are pinned by build.sh or a go.sum; any other
	// module a citation names must be pinned by the harness's go.sum or a tools module's.
	for _, s := range shortNames {
		if s.module != "" {
			ts.pinned[s.module+"@"+s.version] = true
		}
	}
	sums, _ := filepath.Glob(filepath.Join(root, "hack/tools/*/go.sum"))
	for _, f := range append(sums, filepath.Join(root, "go.sum")) {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) == 3 && !strings.HasSuffix(f[1], "/go.mod") {
				ts.pinned[f[0]+"@"+f[1]] = true
			}
		}
	}
	return ts, nil
}

// escape is the module cache's path escaping: an upper-case letter becomes ! and its lower case.
func escape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// errNotATree is a source that is no tree (a pull request's description).
var errNotATree = errors.New("a pull request's description, no file to read")

// errNotPinned is a module no go.sum of the repository pins, so nothing downloads it.
var errNotPinned = errors.New("pinned by no go.sum of the harness or its tools modules, so nothing downloads it")

// errMissingModule is a pinned module that is not in the module cache.
var errMissingModule = errors.New("module not in the module cache")

func (ts *trees) get(s source) (*tree, error) {
	key := s.id + "@" + s.version // a module's id is its path, at any version
	if t, ok := ts.cache[key]; ok {
		if t == nil {
			return nil, ts.missing[key]
		}
		return t, nil
	}
	t, err := ts.open(s)
	if err != nil {
		ts.cache[key] = nil
		ts.missing[key] = err
		return nil, err
	}
	ts.cache[key] = t
	return t, nil
}

func (ts *trees) open(s source) (*tree, error) {
	switch {
	case s.module != "":
		root := filepath.Join(ts.modcache, escape(s.module)+"@"+s.version)
		if _, err := os.Stat(root); err != nil {
			if !ts.pinned[s.module+"@"+s.version] {
				return nil, fmt.Errorf("%w: %s@%s", errNotPinned, s.module, s.version)
			}
			return nil, fmt.Errorf("%w: %s@%s (%s)", errMissingModule, s.module, s.version, s.fetch)
		}
		t := &tree{src: s, files: map[string]bool{}, read: func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(root, p)) }}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			t.files[filepath.ToSlash(rel)] = true
			return nil
		})
		return t, err
	case s.repo != "":
		dir := filepath.Join(ts.gitDir, strings.ReplaceAll(s.repo, "/", "+"))
		if st, err := os.Stat(filepath.Join(dir, "repo")); err == nil && st.IsDir() {
			dir = filepath.Join(dir, "repo")
		}
		if _, err := os.Stat(dir); ts.gitDir == "" || err != nil {
			// No clone: the record of what the check needs of it.
			r, err := readRecord(s)
			if err != nil {
				return nil, err
			}
			return r.tree(s), nil
		}
		out, err := exec.Command("git", "--git-dir", dir, "ls-tree", "-r", "--name-only", s.commit).Output()
		if err != nil {
			return nil, fmt.Errorf("git ls-tree %s in %s: %v", s.commit, dir, err)
		}
		t := &tree{src: s, files: map[string]bool{}, read: func(p string) ([]byte, error) {
			return exec.Command("git", "--git-dir", dir, "show", s.commit+":"+p).Output()
		}}
		for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			t.files[f] = true
		}
		return t, nil
	case s.id == "#4911":
		return nil, errNotATree
	}
	return nil, fmt.Errorf("%s: no pinned tree", s.id)
}

// names0 is every file of the tree, sorted.
func (t *tree) names0() []string {
	if t.names == nil {
		for f := range t.files {
			t.names = append(t.names, f)
		}
		sort.Strings(t.names)
	}
	return t.names
}

// find resolves a cited path in the tree: the path itself, else the one file whose path ends
// in it, else (several) the one in near's folder. It says what it found instead when none is.
func (t *tree) find(p, near string) (string, error) {
	if t.files[p] {
		return p, nil
	}
	var hits []string
	for _, f := range t.names0() {
		if strings.HasSuffix(f, "/"+p) {
			hits = append(hits, f)
		}
	}
	switch {
	case len(hits) == 1 && strings.Contains(p, "/"):
		return hits[0], nil
	case len(hits) == 1:
		// A bare file name may be of a file the module leaves out (a staging module's).
		return hits[0], errGuessed
	case len(hits) == 0:
		return "", fmt.Errorf("no file %s", p)
	}
	// Cozystack's pages say chart paths are under packages/apps/kubernetes/ (docs/signals.md,
	// "Pool lifecycle"): the one there, as a guess.
	if strings.HasPrefix(t.src.module+t.src.repo, "github.com/cozystack/cozystack") || t.src.repo == "cozystack/cozystack" {
		if f := "packages/apps/kubernetes/" + strings.TrimPrefix(p, "packages/apps/kubernetes/"); t.files[f] {
			return f, errGuessed
		}
	}
	if near != "" {
		var close []string
		for _, h := range hits {
			if strings.HasPrefix(h, filepath.Dir(near)+"/") {
				close = append(close, h)
			}
		}
		if len(close) == 1 {
			return close[0], errGuessed
		}
	}
	return "", fmt.Errorf("%d files end in %s (%s, ...): %w", len(hits), p, hits[0], errAmbiguous)
}

var errAmbiguous = errors.New("name the path further")

// errGuessed is a path found only as the one of its name beside the citation before it.
var errGuessed = errors.New("guessed from the citation before it")
