package lane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Load reads, decodes and validates one lane file. A returned error is Errors: every problem
// found, each naming the file, the field and, where known, the line.
func Load(path string) (*Lane, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lane %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse decodes and validates lane data; path is used in messages and for the name check.
func Parse(path string, data []byte) (*Lane, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, Errors{{File: path, Issue: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Errors{{File: path, Line: extra.Line, Issue: "holds more than one YAML document; a lane file is one"}}
	}
	if len(root.Content) == 0 {
		return nil, Errors{{File: path, Issue: "is empty"}}
	}
	owner := map[*yaml.Node]string{}
	r, err := resolveExtends(path, root.Content[0], nil, owner)
	if err != nil {
		return nil, err
	}
	doc, parent := r.doc, r.parent
	l := &Lane{File: path}
	d := &decoder{file: path, lines: map[string]int{}, owner: owner, inherited: map[string]string{}}
	d.decode("", doc, reflect.ValueOf(l).Elem())
	l.Extends = parent
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	// The lane as one document (its extends chain merged, its paths resolved), for a copy
	// read elsewhere to mean what this file means.
	if l.resolveSuites(r.suitesFrom, doc) || parent != "" {
		if l.Resolved, err = yaml.Marshal(doc); err != nil {
			return nil, Errors{{File: path, Issue: "extends: " + err.Error()}}
		}
	}
	l.lines, l.inherited = d.lines, d.inherited
	for i := range l.Pools {
		l.Pools[i].src = i + 1
	}
	if errs := l.Validate(); len(errs) > 0 {
		return nil, errs
	}
	// The clusters made at several versions are expanded once the lane is known good, and the
	// expanded lane is held to the same rules (its names' lengths, say).
	l.expand()
	if errs := l.Validate(); len(errs) > 0 {
		return nil, errs
	}
	return l, nil
}

// ExampleLanes is where the example suites keep their lanes, beside the lanes folder: Find
// looks there for a name the lanes folder lacks, and lanes-check and workflows-check read them
// too (LoadDirs).
const ExampleLanes = "examples/*/lanes"

// LoadDirs loads the lanes of each folder (LoadDir), every folder's errors joined.
func LoadDirs(dirs []string) ([]*Lane, error) {
	var lanes []*Lane
	var errs []error
	for _, d := range dirs {
		ls, err := LoadDir(d)
		lanes = append(lanes, ls...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return lanes, errors.Join(errs...)
}

// LoadDir loads every *.yaml lane in dir, sorted by name. It returns the lanes that loaded and
// one error joining every file's problems.
func LoadDir(dir string) ([]*Lane, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no lane files (*.yaml)", dir)
	}
	sort.Strings(paths)
	var lanes []*Lane
	var errs []error
	for _, p := range paths {
		l, err := Load(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lanes = append(lanes, l)
	}
	return lanes, errors.Join(errs...)
}

// Alias is an old lane name that still runs, for one release, as the lane it merged into.
type Alias struct {
	// Lane is the lane it runs; Why says what became of it.
	Lane, Why string
}

// Aliases are the old lane names: the kind lanes of one tenant version each, merged into one
// lane whose conformance clusters run every version on one platform install.
var Aliases = map[string]Alias{
	"kubernetes-latest":   {Lane: "kubernetes", Why: "its v1.35 tenant cluster is one of lane kubernetes's clusters, beside v1.34, on one platform install"},
	"kubernetes-previous": {Lane: "kubernetes", Why: "its v1.34 tenant cluster is one of lane kubernetes's clusters, beside v1.35, on one platform install"},
}

// Find loads lanes/<name>.yaml under dir, or the file itself when name is a path. An old name
// (Aliases) with no file of its own loads the lane it merged into, with Deprecation set.
func Find(dir, name string) (*Lane, error) {
	if strings.HasSuffix(name, ".yaml") || strings.ContainsRune(name, os.PathSeparator) {
		return Load(name)
	}
	path := filepath.Join(dir, name+".yaml")
	if a, ok := Aliases[name]; ok {
		if _, err := os.Stat(path); err != nil {
			l, err := Find(dir, a.Lane)
			if err != nil {
				return nil, fmt.Errorf("lane %s (an old name of lane %s): %w", name, a.Lane, err)
			}
			l.Deprecation = fmt.Sprintf("lane %s is deprecated and runs lane %s: %s; the old name goes in the next release (use LANE=%s)", name, a.Lane, a.Why, a.Lane)
			return l, nil
		}
	}
	if _, err := os.Stat(path); err != nil {
		if ex, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ExampleLanes, name+".yaml")); len(ex) == 1 {
			return Load(ex[0])
		}
		known, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		names := make([]string, 0, len(known))
		for _, k := range known {
			names = append(names, strings.TrimSuffix(filepath.Base(k), ".yaml"))
		}
		return nil, fmt.Errorf("lane %q: no file %s (lanes here: %s)", name, path, strings.Join(names, ", "))
	}
	return Load(path)
}
