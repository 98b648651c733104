package assumptions

import (
	"embed"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed graph-*.yaml
var graphFiles embed.FS

// SourcesDir is where the PackageSources live in the Cozystack repository; a Package's
// Source and its dependencies' lines are in files there.
const SourcesDir = "packages/core/platform"

// Graph is the Package dependency graph of the platform at one revision, for the variant and
// bundles the kind lanes use.
type Graph struct {
	// File is the embedded file it was read from.
	File       string    `json:"-"`
	Repository string    `json:"repository"`
	Ref        string    `json:"ref"`
	Revision   string    `json:"revision"`
	Packages   []Package `json:"packages"`

	byName map[string]*Package
}

// Package is one Package the platform emits, with the dependencies of its variant.
type Package struct {
	Name    string `json:"name"`
	Variant string `json:"variant"`
	// Source is the PackageSource file and the line of the variant (sources/<file>:<line>).
	Source string `json:"source"`
	// Emitted are the template lines that emit the Package.
	Emitted   []string     `json:"emitted"`
	DependsOn []Dependency `json:"dependsOn"`
}

// Dependency is one entry of a variant's dependsOn, with its line in the Package's source.
type Dependency struct {
	Name string `json:"name"`
	Line int    `json:"line"`
}

// At is where the dependency is declared: sources/<file>:<line>.
func (p *Package) At(d Dependency) string {
	file, _, _ := strings.Cut(p.Source, ":")
	return fmt.Sprintf("%s:%d", file, d.Line)
}

// Short is the revision as people write it: the ref and the short commit.
func (g *Graph) Short() string {
	if strings.HasPrefix(g.Ref, "v") {
		return g.Ref
	}
	return g.Ref + " " + g.Revision[:12]
}

// Has says whether the platform emits the Package at this revision.
func (g *Graph) Has(name string) bool { return g.byName[name] != nil }

// Graphs are the embedded graphs, newest first: main, then the release.
func Graphs() ([]*Graph, error) {
	entries, err := graphFiles.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var out []*Graph
	for _, e := range entries {
		data, err := graphFiles.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		g := &Graph{File: e.Name()}
		if err := yaml.UnmarshalStrict(data, g); err != nil {
			return nil, fmt.Errorf("internal/install/assumptions/%s: %w", e.Name(), err)
		}
		g.byName = map[string]*Package{}
		for i := range g.Packages {
			g.byName[g.Packages[i].Name] = &g.Packages[i]
		}
		for _, p := range g.Packages {
			for _, d := range p.DependsOn {
				if g.byName[d.Name] == nil {
					return nil, fmt.Errorf("internal/install/assumptions/%s: %s depends on %s, which the graph does not hold", e.Name(), p.Name, d.Name)
				}
			}
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref == "main" && out[j].Ref != "main" })
	return out, nil
}

// Link is one step of a chain: Package needs Dependency, declared At.
type Link struct {
	Package, Dependency, At string
}

// Orphan is a Package that would never get a HelmRelease because a Package it depends on,
// directly or through others, is disabled: Chain runs from the disabled Package to it.
type Orphan struct {
	Package  string
	Disabled string
	Chain    []Link
}

// Orphans are the Packages the disabled set leaves without a dependency, each with the
// shortest chain from a disabled Package to it, sorted by name.
func (g *Graph) Orphans(disabled []string) []Orphan {
	off := map[string]bool{}
	for _, d := range disabled {
		off[d] = true
	}
	// Reverse edges among the Packages that remain.
	dependants := map[string][]Link{}
	for _, p := range g.Packages {
		if off[p.Name] {
			continue
		}
		for _, d := range p.DependsOn {
			pp := g.byName[p.Name]
			dependants[d.Name] = append(dependants[d.Name], Link{Package: p.Name, Dependency: d.Name, At: pp.At(d)})
		}
	}
	// Breadth first from every disabled Package at once: the first chain to reach a Package is
	// a shortest one.
	found := map[string]Orphan{}
	type item struct {
		name  string
		from  string
		chain []Link
	}
	var queue []item
	for _, d := range sortedKeys(off) {
		queue = append(queue, item{name: d, from: d})
	}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		for _, l := range dependants[it.name] {
			if off[l.Package] {
				continue
			}
			if _, seen := found[l.Package]; seen {
				continue
			}
			chain := append(append([]Link{}, it.chain...), l)
			found[l.Package] = Orphan{Package: l.Package, Disabled: it.from, Chain: chain}
			queue = append(queue, item{name: l.Package, from: it.from, chain: chain})
		}
	}
	out := make([]Orphan, 0, len(found))
	for _, name := range sortedKeys(found) {
		out = append(out, found[name])
	}
	return out
}

// Dependants are the Packages that depend on name directly, sorted.
func (g *Graph) Dependants(name string) []string {
	var out []string
	for _, p := range g.Packages {
		for _, d := range p.DependsOn {
			if d.Name == name {
				out = append(out, p.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Describe is the chain as a person reads it: "disabling A orphans B (needs it, at) → C (at)".
func (o Orphan) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "disabling %s orphans ", o.Disabled)
	for i, l := range o.Chain {
		if i > 0 {
			b.WriteString(" → ")
		}
		b.WriteString(l.Package)
		if i == 0 {
			fmt.Fprintf(&b, " (needs it, %s)", l.At)
		} else {
			fmt.Fprintf(&b, " (needs %s, %s)", l.Dependency, l.At)
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
