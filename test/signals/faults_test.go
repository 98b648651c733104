package signals

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

// docs/sim.md's fault table lists exactly the catalogue's faults, each with what it imitates.
func TestFaultTableIsTheCatalogue(t *testing.T) {
	data, err := os.ReadFile("../../docs/sim.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "| fault | effect | imitates")
	if start < 0 {
		t.Fatal("docs/sim.md has no fault table with an imitates column (| fault | effect | imitates ...)")
	}
	row := regexp.MustCompile("^\\| `([a-z0-9-]+)` \\|([^|]*)\\|([^|]*)\\|")
	inDoc := map[string]bool{}
	for _, line := range strings.Split(text[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("docs/sim.md fault row does not read | `name` | effect | imitates | ...: %s", line)
			continue
		}
		inDoc[m[1]] = true
		if strings.TrimSpace(m[3]) == "" {
			t.Errorf("docs/sim.md fault %s: the imitates column is empty", m[1])
		}
	}
	var missing, unknown []string
	for _, f := range faults.Catalogue() {
		if !inDoc[string(f.Name)] {
			missing = append(missing, string(f.Name))
		}
		delete(inDoc, string(f.Name))
	}
	for n := range inDoc {
		unknown = append(unknown, n)
	}
	sort.Strings(unknown)
	if len(missing) > 0 || len(unknown) > 0 {
		t.Errorf("docs/sim.md's fault table and internal/sim/faults differ: missing from docs/sim.md %v; not in the catalogue %v", missing, unknown)
	}
}
