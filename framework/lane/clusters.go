package lane

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// Cluster is one conformance cluster of the lane (clusters[]): a Kubernetes app of the tenant
// whose node groups are the pools that name it (pools[].cluster), at its own tenant Kubernetes
// release. An entry with versions stands for one cluster per version it selects.
type Cluster struct {
	Name string `json:"name" lane:"required"`
	// Kubernetes is the release the cluster runs; unset, the lane's kubernetes. Its patch may
	// be left out: the chart's release for the version at the pinned revision.
	Kubernetes *Release `json:"kubernetes,omitempty"`
	// Versions makes the entry one cluster per tenant version it selects from what the
	// platform's Kubernetes chart offers at the pinned revision (TenantVersions): each is named
	// <name>-<version with dots as dashes> ("join-v1-35"), and each pool that names the entry is
	// one pool per cluster, named the same way ("md0-v1-35").
	Versions *Versions `json:"versions,omitempty"`

	// Expanded is the entry a cluster was made from by its versions ("" when written as is), and
	// Selected what those versions said ("newest 2").
	Expanded, Selected string `json:"-"`
	// src is 1 + the index of the clusters[] entry it came from; 0 for a cluster only pools
	// name, or made in code.
	src int
}

// Release is a cluster's tenant Kubernetes release.
type Release struct {
	// Version is the app's version key ("v1.35"), one the chart offers.
	Version string `json:"version" lane:"required"`
	// Patch is the release the workers' kubelet reports ("v1.35.6"); empty, the chart's.
	Patch string `json:"patch,omitempty"`
}

// Versions selects tenant versions from what the chart offers: every one (versions: offered),
// the newest N (versions: {newest: N}), or a list (versions: [v1.35, v1.34]).
type Versions struct {
	Offered bool
	Newest  int
	List    []string
}

func (v *Versions) decodeNode(n *yaml.Node) error {
	const want = "want offered, {newest: N} or a list of version keys such as [v1.35, v1.34]"
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value != "offered" {
			return fmt.Errorf("%q: %s", n.Value, want)
		}
		v.Offered = true
	case yaml.MappingNode:
		if len(n.Content) != 2 || n.Content[0].Value != "newest" {
			return fmt.Errorf("a mapping may only say newest: %s", want)
		}
		i, err := strconv.Atoi(n.Content[1].Value)
		if err != nil || n.Content[1].Kind != yaml.ScalarNode {
			return fmt.Errorf("newest: %q is not a whole number", n.Content[1].Value)
		}
		v.Newest = i
	case yaml.SequenceNode:
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s, found a %s in the list", want, kindName(item))
			}
			v.List = append(v.List, item.Value)
		}
	default:
		return fmt.Errorf("%s", want)
	}
	return nil
}

// MarshalJSON writes the selector as a lane file spells it.
func (v Versions) MarshalJSON() ([]byte, error) {
	switch {
	case v.Offered:
		return []byte(`"offered"`), nil
	case v.Newest > 0:
		return []byte(fmt.Sprintf(`{"newest":%d}`, v.Newest)), nil
	}
	return json.Marshal(v.List)
}

func (v Versions) String() string {
	switch {
	case v.Offered:
		return "offered"
	case v.Newest > 0:
		return fmt.Sprintf("newest %d", v.Newest)
	}
	return strings.Join(v.List, ", ")
}

// TenantVersions are the tenant versions the platform's Kubernetes chart offers at the revision
// the lane is held to: the sim's chart (cozystack v1.6.1) on a sim lane, the platform's
// (cozystack main as read) on a kind or existing lane.
func (l *Lane) TenantVersions() TenantOffer { return TenantOffer{l.tenantVersions()} }

// tenantVersions is TenantVersions as internal/install/assumptions holds it, each version with its
// release, for the checks and the expansion of versions.
func (l *Lane) tenantVersions() assumptions.TenantVersions {
	if l.Substrate == SubstrateSim {
		return assumptions.SimTenantVersions()
	}
	return assumptions.KindTenantVersions()
}

// TenantOffer is what the platform's Kubernetes chart offers a lane's conformance clusters at
// one revision (Lane.TenantVersions); it prints as "cozystack <revision> offers v1.35, v1.34,
// ... (<the values schema, path:lines>)".
type TenantOffer struct{ tv assumptions.TenantVersions }

func (o TenantOffer) String() string { return o.tv.String() }

// Patches is where the chart gives each version its release (path:lines of its version map).
func (o TenantOffer) Patches() string { return o.tv.Patches }

// ConformanceClusters are the lane's conformance clusters in the order of their first pool,
// each with its release (Cluster).
func (l *Lane) ConformanceClusters() []Cluster {
	var out []Cluster
	for _, name := range l.Clusters() {
		c, _ := l.Cluster(name)
		out = append(out, c)
	}
	return out
}

// Cluster is conformance cluster name with its release resolved: its own, else the lane's
// kubernetes, its patch the chart's when the lane leaves it out. ok is false for a name no
// pool gives.
func (l *Lane) Cluster(name string) (c Cluster, ok bool) {
	for _, p := range l.Pools {
		ok = ok || p.ClusterName() == name
	}
	c = Cluster{Name: name}
	for _, d := range l.ClusterSpecs {
		if d.Name == name {
			c = d
		}
	}
	r := Release{Version: l.Kubernetes.Version, Patch: l.Kubernetes.Patch}
	if c.Kubernetes != nil {
		r = *c.Kubernetes
		if r.Patch == "" {
			if o, found := l.tenantVersions().Find(r.Version); found {
				r.Patch = o.Patch
			}
		}
	}
	c.Kubernetes = &r
	return c, ok
}

// Release is the tenant release of the conformance cluster pool p is a node group of.
func (l *Lane) Release(p Pool) Release {
	c, _ := l.Cluster(p.ClusterName())
	return *c.Kubernetes
}

// versionTag is a version key as a name part: "v1.35" -> "v1-35".
func versionTag(v string) string { return strings.ReplaceAll(v, ".", "-") }

// selected are the releases versions v selects from what tv offers, newest first for offered
// and newest, in the lane's order for a list; the error says what the chart does not offer.
func selected(v Versions, tv assumptions.TenantVersions) ([]assumptions.TenantVersion, error) {
	switch {
	case v.Offered:
		return tv.Offered, nil
	case v.Newest > 0:
		if v.Newest > len(tv.Offered) {
			return nil, fmt.Errorf("newest %d: %s, %d versions", v.Newest, tv, len(tv.Offered))
		}
		return tv.Offered[:v.Newest], nil
	case len(v.List) > 0:
		var out []assumptions.TenantVersion
		for _, key := range v.List {
			o, ok := tv.Find(key)
			if !ok {
				return nil, fmt.Errorf("%q is not a version the chart offers: %s", key, tv)
			}
			if slices.Contains(out, o) {
				return nil, fmt.Errorf("%q is listed twice", key)
			}
			out = append(out, o)
		}
		return out, nil
	}
	return nil, fmt.Errorf("selects no version (newest must be at least 1)")
}

// validateClusters checks clusters[] and the releases the lane's conformance clusters run: each
// entry names pools, says either kubernetes or versions, and every version is one the chart
// offers at the pinned revision, its patch the chart's.
func (l *Lane) validateClusters(v *validator) {
	tv := l.tenantVersions()
	l.validateRelease(v, "kubernetes", Release{Version: l.Kubernetes.Version, Patch: l.Kubernetes.Patch}, tv)
	seen := map[string]bool{}
	for i, c := range l.ClusterSpecs {
		if c.src > 0 {
			i = c.src - 1
		}
		path := fmt.Sprintf("clusters[%d]", i)
		v.uniqueName(path+".name", c.Name, "a DNS label", seen)
		if c.Name == RefusalCluster {
			v.fail(path+".name", "%q is the kubernetes suite's cluster of refused pools; name the cluster otherwise", c.Name)
		}
		named := false
		for _, p := range l.Pools {
			named = named || p.Cluster == c.Name || (c.Name == DefaultCluster && p.Cluster == "")
		}
		if !named {
			v.fail(path+".name", "cluster %q: no pool names it (pools[].cluster)", c.Name)
		}
		switch {
		case c.Kubernetes != nil && c.Versions != nil:
			v.fail(path+".versions", "is given with kubernetes: a cluster runs one release, an entry with versions one per version")
		case c.Kubernetes != nil:
			l.validateRelease(v, path+".kubernetes", *c.Kubernetes, tv)
		case c.Versions != nil:
			if _, err := selected(*c.Versions, tv); err != nil {
				v.fail(path+".versions", "%v", err)
			}
		}
	}
}

// validateRelease holds r to what the chart offers (tv).
func (l *Lane) validateRelease(v *validator, path string, r Release, tv assumptions.TenantVersions) {
	m := minorRe.FindStringSubmatch(r.Version)
	if m == nil {
		v.fail(path+".version", "%q is not a version key like v1.35", r.Version)
		return
	}
	o, ok := tv.Find(r.Version)
	if !ok {
		v.fail(path+".version", "%s is not a version the platform's Kubernetes chart offers at the pinned revision: %s", r.Version, tv)
		return
	}
	if r.Patch == "" {
		return
	}
	p := patchRe.FindStringSubmatch(r.Patch)
	switch {
	case p == nil:
		v.fail(path+".patch", "%q is not a release like v1.35.6", r.Patch)
	case p[1] != m[1]:
		v.fail(path+".patch", "%s is not a release of %s", r.Patch, r.Version)
	case r.Patch != o.Patch:
		v.fail(path+".patch", "%s: the chart renders %s for %s at cozystack %s (%s); the workers' kubelet reports that (leave patch out to take it)",
			r.Patch, o.Patch, r.Version, assumptions.ShortRevision(tv.Revision), tv.Patches)
	}
}

// expand makes every clusters[] entry with versions one cluster per version, and every pool
// that names it one pool per cluster. It runs once the lane is valid; after it the lane has
// no versions left, and Validate holds the expanded names (label lengths, uniqueness).
func (l *Lane) expand() {
	tv := l.tenantVersions()
	var clusters []Cluster
	pools := l.Pools
	for i, c := range l.ClusterSpecs {
		c.src = i + 1
		if c.Versions == nil {
			clusters = append(clusters, c)
			continue
		}
		rels, _ := selected(*c.Versions, tv)
		var next []Pool
		for _, p := range pools {
			if p.Cluster != c.Name {
				next = append(next, p)
				continue
			}
			for _, r := range rels {
				q := p
				q.Name, q.Cluster = p.Name+"-"+versionTag(r.Version), c.Name+"-"+versionTag(r.Version)
				next = append(next, q)
			}
		}
		pools = next
		for _, r := range rels {
			clusters = append(clusters, Cluster{Name: c.Name + "-" + versionTag(r.Version), Kubernetes: &Release{Version: r.Version, Patch: r.Patch},
				Expanded: c.Name, Selected: c.Versions.String(), src: i + 1})
		}
	}
	l.ClusterSpecs, l.Pools = clusters, pools
}

// validatePoolRelease refuses a pool on a class that names an image in a cluster of another
// minor: the class fixes the workers' release, and the chart only checks that the class's
// minor is the pool's version (the seed, cozystack/cozystack#4911, l.379-385).
func (l *Lane) validatePoolRelease(v *validator, path string, p Pool) {
	for _, c := range l.Classes {
		if c.Name != p.Class || c.Image == "" {
			continue
		}
		r := l.Release(p)
		if m := patchRe.FindStringSubmatch(c.KubernetesVersion); m != nil && "v1."+m[1] != r.Version {
			v.fail(path+".class", "class %s is built for Kubernetes %s, but pool %s is in cluster %s at %s; the platform refuses a class of another minor than its cluster",
				c.Name, c.KubernetesVersion, p.Name, p.ClusterName(), r.Version)
		}
	}
}
