package assumptions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/upstream.md names every fact the kind node relies on, with its value and its source.
func TestEveryNodeAssumptionIsInDocsUpstream(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "upstream.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, a := range NodeAssumptions() {
		for _, want := range []string{"`" + a.Name + "`", a.Value, a.Source} {
			if !strings.Contains(doc, want) {
				t.Errorf("docs/upstream.md does not name %q (assumption %s = %s, from %s)", want, a.Name, a.Value, a.Source)
			}
		}
	}
}
