package lane

import (
	"path/filepath"

	yaml "go.yaml.in/yaml/v3"
)

// resolvePath is the one reading of a path a lane file names (suites[].path, extends by
// path), for the check, the plan and the run alike: an absolute path as it is, else relative
// to the folder of file, the lane file that names it.
func resolvePath(file, p string) string {
	p = filepath.FromSlash(p)
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(file), p)
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

// Dir is the folder of the suite's Go package, resolved from its path against the lane file
// that names it (the lane's own, or the lane it extends when the suites are inherited); ""
// for a suite of this harness (suites/<name>).
func (s Suite) Dir() string {
	if s.dir != "" || s.Path == "" {
		return s.dir
	}
	return filepath.Clean(filepath.FromSlash(s.Path))
}

// From is the lane file that names the suite (its path is read from that file's folder).
func (s Suite) From() string { return s.from }

// resolveSuites sets every suite's folder from the lane file that wrote the suites list, and
// writes those folders into the lane document doc, so a copy of it read elsewhere (the run's
// lane copy, a repro) names the same folders. It says whether it changed doc.
func (l *Lane) resolveSuites(from string, doc *yaml.Node) bool {
	for i := range l.Suites {
		if l.Suites[i].Path != "" {
			l.Suites[i].dir = resolvePath(from, l.Suites[i].Path)
		}
		l.Suites[i].from = from
	}
	changed := false
	if doc.Kind != yaml.MappingNode {
		return false
	}
	k := keyIndex(doc, "suites")
	if k < 0 || doc.Content[k+1].Kind != yaml.SequenceNode {
		return false
	}
	for i, entry := range doc.Content[k+1].Content {
		if entry.Kind != yaml.MappingNode || i >= len(l.Suites) {
			continue
		}
		if p := keyIndex(entry, "path"); p >= 0 && entry.Content[p+1].Value != l.Suites[i].dir {
			entry.Content[p+1].Value = l.Suites[i].dir
			changed = true
		}
	}
	return changed
}
