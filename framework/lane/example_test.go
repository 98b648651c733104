package lane_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// A lane that extends sim is sim's lane with its own fields over it: its suites, and a phase
// added to the budget before teardown.
func ExampleLoad() {
	l, err := lane.Load(filepath.Join("..", "..", "examples", "nodelabels", "lanes", "sim-nodelabels.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(l.Name, "extends", filepath.Base(l.Extends), "on", l.Substrate)
	for _, s := range l.Suites {
		fmt.Println("suite", s.Name, "at path", s.Path, "from", filepath.Base(s.From()), "is folder", filepath.Base(s.Dir()))
	}
	var phases []string
	for _, p := range l.Budget.Phases {
		phases = append(phases, p.Name)
	}
	fmt.Println(strings.Join(phases, " "))
	fmt.Println("job cap", l.Budget.JobCap)
	// Output:
	// sim-nodelabels extends sim.yaml on sim
	// suite nodelabels at path .. from sim-nodelabels.yaml is folder nodelabels
	// preflight cluster tenant pools refusals labels teardown
	// job cap 14m0s
}
