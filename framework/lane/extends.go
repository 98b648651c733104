package lane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// A lane may extend another (extends: <lane>): it is the other lane with its own fields over
// it. A mapping merges key by key, its own keys winning (kubernetes, sim, budget); a list is
// replaced whole (pools, suites, classes, clusters), except budget.phases, merged by name: a
// phase the parent has takes the child's fields over its own, a new one goes before the
// parent's teardown (the phase that is always last), else at the end. name and description are
// the child's own; a lane may extend a lane that extends another.

// maxExtends bounds an extends chain (a cycle is named before).
const maxExtends = 8

// resolved is a lane document with the lane it extends merged under it.
type resolved struct {
	doc *yaml.Node
	// parent is the file it extends ("" when none); suitesFrom the file that wrote its suites
	// list (its paths are read from that file's folder).
	parent, suitesFrom string
}

// resolveExtends is the lane document of file path, node, with the lane it extends merged
// under it; owner gets the file that wrote each node of it (a node the merge made is path's).
func resolveExtends(path string, node *yaml.Node, seen []string, owner map[*yaml.Node]string) (resolved, error) {
	if node.Kind != yaml.MappingNode {
		return resolved{doc: node, suitesFrom: path}, nil
	}
	i := keyIndex(node, "extends")
	if i < 0 {
		return resolved{doc: node, suitesFrom: path}, nil
	}
	own(node, path, owner)
	val := node.Content[i+1]
	fail := func(format string, a ...any) error {
		return Errors{{File: path, Line: val.Line, Path: "extends", Issue: fmt.Sprintf(format, a...)}}
	}
	if val.Kind != yaml.ScalarNode || val.Value == "" {
		return resolved{}, fail("must name a lane (extends: sim) or a lane file")
	}
	parent, err := findParent(path, val.Value)
	if err != nil {
		return resolved{}, fail("%v", err)
	}
	for _, s := range seen {
		if s == parent {
			return resolved{}, fail("%s extends itself through %s", parent, strings.Join(seen, " -> "))
		}
	}
	if len(seen) >= maxExtends {
		return resolved{}, fail("extends more than %d lanes deep", maxExtends)
	}
	data, err := os.ReadFile(parent)
	if err != nil {
		return resolved{}, fail("%v", err)
	}
	var proot yaml.Node
	if err := yaml.Unmarshal(data, &proot); err != nil || len(proot.Content) == 0 {
		return resolved{}, fail("%s is not a lane file (%v)", parent, err)
	}
	own(proot.Content[0], parent, owner)
	up, err := resolveExtends(parent, proot.Content[0], append(seen, path), owner)
	if err != nil {
		return resolved{}, err
	}
	base := up.doc
	mine := &yaml.Node{Kind: yaml.MappingNode, Tag: node.Tag, Line: node.Line, Column: node.Column}
	for j := 0; j+1 < len(node.Content); j += 2 {
		if j != i {
			mine.Content = append(mine.Content, node.Content[j], node.Content[j+1])
		}
	}
	drops, err := dropped(path, mine)
	if err != nil {
		return resolved{}, err
	}
	merged := merge(base, mine, "")
	own(merged, path, owner)
	if err := drop(path, parent, merged, drops); err != nil {
		return resolved{}, err
	}
	// A lane's description is its own: the parent's would describe another lane.
	if keyIndex(mine, "description") < 0 {
		if d := keyIndex(merged, "description"); d >= 0 {
			merged.Content = append(merged.Content[:d], merged.Content[d+2:]...)
		}
	}
	// A list is replaced whole: the suites are the file's own, or the ones it inherits.
	from := up.suitesFrom
	if keyIndex(mine, "suites") >= 0 {
		from = path
	}
	return resolved{doc: merged, parent: parent, suitesFrom: from}, nil
}

// findParent is the file of the lane named name, for the lane at path: a path (with a slash or
// .yaml), absolute or relative to path's folder (resolvePath), else <name>.yaml beside it,
// else lanes/<name>.yaml in the nearest folder above it that has one.
func findParent(path, name string) (string, error) {
	dir := filepath.Dir(path)
	if strings.HasSuffix(name, ".yaml") || strings.ContainsRune(name, '/') {
		p := resolvePath(path, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("no lane file %s (a path is absolute or relative to the folder of %s)", p, path)
		}
		return p, nil
	}
	tried := []string{filepath.Join(dir, name+".yaml")}
	if _, err := os.Stat(tried[0]); err == nil {
		return tried[0], nil
	}
	for d := dir; ; {
		p := filepath.Join(d, "lanes", name+".yaml")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
		up := filepath.Dir(d)
		if up == d || d == "." {
			break
		}
		d = up
	}
	return "", fmt.Errorf("no lane %q (looked at %s); name a lane file by its path to extend one elsewhere", name, strings.Join(tried, ", "))
}

// own records file as the writer of n and of every node under it that has none yet.
func own(n *yaml.Node, file string, owner map[*yaml.Node]string) {
	if _, ok := owner[n]; ok {
		return
	}
	owner[n] = file
	for _, c := range n.Content {
		own(c, file, owner)
	}
}

// keyIndex is the index of key's key node in mapping m, or -1.
func keyIndex(m *yaml.Node, key string) int {
	for j := 0; j+1 < len(m.Content); j += 2 {
		if m.Content[j].Value == key {
			return j
		}
	}
	return -1
}

// merge is over laid on base at field path at: mappings merge key by key, budget.phases by
// name, anything else is over's.
func merge(base, over *yaml.Node, at string) *yaml.Node {
	switch {
	case at == "budget.phases" && base.Kind == yaml.SequenceNode && over.Kind == yaml.SequenceNode:
		return mergePhases(base, over)
	case base.Kind != yaml.MappingNode || over.Kind != yaml.MappingNode:
		return over
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: base.Tag, Line: over.Line, Column: over.Column}
	out.Content = append(out.Content, base.Content...)
	for j := 0; j+1 < len(over.Content); j += 2 {
		k, v := over.Content[j], over.Content[j+1]
		path := k.Value
		if at != "" {
			path = at + "." + k.Value
		}
		if b := keyIndex(out, k.Value); b >= 0 {
			out.Content[b+1] = merge(out.Content[b+1], v, path)
			continue
		}
		out.Content = append(out.Content, k, v)
	}
	return out
}

// mergePhases merges the phases of over into base's by name; a new phase goes before base's
// teardown, or last.
func mergePhases(base, over *yaml.Node) *yaml.Node {
	out := &yaml.Node{Kind: yaml.SequenceNode, Tag: base.Tag, Style: base.Style, Line: over.Line, Column: over.Column}
	out.Content = append(out.Content, base.Content...)
	name := func(n *yaml.Node) string {
		if n.Kind == yaml.MappingNode {
			if i := keyIndex(n, "name"); i >= 0 {
				return n.Content[i+1].Value
			}
		}
		return ""
	}
	for _, p := range over.Content {
		at := -1
		for j, b := range out.Content {
			if name(b) != "" && name(b) == name(p) {
				at = j
			}
		}
		if at >= 0 {
			out.Content[at] = merge(out.Content[at], p, "")
			continue
		}
		pos := len(out.Content)
		if n := len(out.Content); n > 0 && name(out.Content[n-1]) == "teardown" {
			pos = n - 1
		}
		out.Content = append(out.Content[:pos], append([]*yaml.Node{p}, out.Content[pos:]...)...)
	}
	return out
}
