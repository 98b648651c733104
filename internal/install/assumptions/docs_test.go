package assumptions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/upstream.md lists every assumption the real lane makes about the platform: each
// constant here with its value and its source line, both revisions, both graphs, and each
// Package the suites need. A lane assumption with no line there is a bug.
func TestEveryAssumptionIsInDocsUpstream(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "upstream.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, a := range Assumptions() {
		for _, want := range []string{"`" + a.Name + "`", a.Value, a.Source} {
			if !strings.Contains(doc, want) {
				t.Errorf("docs/upstream.md does not name %q (assumption %s = %s, from %s)", want, a.Name, a.Value, a.Source)
			}
		}
	}
	for _, want := range []string{CozystackMain, CozystackRelease, "graph-main-3c780acd417f.yaml", "graph-v1.6.2.yaml", "package_reconciler.go:187-202"} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/upstream.md does not name %s", want)
		}
	}
	for _, n := range SuiteNeeds() {
		if n.Package == "cozystack.victoria-metrics-operator" && !strings.Contains(doc, "victoria-metrics-operator") {
			t.Errorf("docs/upstream.md does not say why the suites need %s", n.Package)
		}
	}
}
