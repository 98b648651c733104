package e2ecmd

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/registry"
)

// cmdSubstrate prints the substrate of the lane as loaded (its extends chain merged): what
// make e2e reads to know whether the lane needs the local control plane built first.
func cmdSubstrate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("e2e substrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("lane", "sim", "lane name (lanes/<name>.yaml) or lane file")
	dir := fs.String("lanes-dir", "lanes", "folder of the lane files")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	l, err := findLane(*dir, *name)
	if err != nil {
		fmt.Fprintf(stderr, "e2e substrate: --lane %s: %v\n", *name, err)
		return exitConfig
	}
	fmt.Fprintln(stdout, l.Substrate)
	return exitPass
}

// findLane loads lane name (a name in dir, relative to the checkout unless absolute, or a
// lane file) as run, down and substrate do.
func findLane(dir, name string) (*lane.Lane, error) {
	root, err := projectRoot()
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	return lane.Find(dir, name)
}

// accepted says what --check accepted: the lane file (and the one it extends), its substrate,
// each suite and the folder it is built in, and the budget's sum.
func accepted(w io.Writer, root string, l *lane.Lane) {
	from := l.File
	if l.Extends != "" {
		from += ", extends " + l.Extends
	}
	var suites []string
	for _, s := range l.Suites {
		suites = append(suites, fmt.Sprintf("%s in %s", s.Name, suiteDir(root, s)))
	}
	// The run's first line names the artifacts folder ("artifacts <dir>"); this line says the
	// reserve for them in other words, so nothing reading the run takes one for the other.
	a := l.Budget.Arithmetic()
	more, _ := l.PerPool(registry.Catalog(l))
	perPool := ""
	if more > 0 {
		perPool = fmt.Sprintf(" + per-pool %s", more)
	}
	sum := fmt.Sprintf("phases %s%s + diagnostics %s + artifact reserve %s + margin %s = %s of jobCap %s",
		a.Phases, perPool, a.Diagnostics, a.Artifacts, a.Margin, a.Total+more, a.Cap)
	fmt.Fprintf(w, "e2e run --check: lane %s ok (%s): substrate %s; suites %s; %s\n",
		l.Name, from, l.Substrate, strings.Join(suites, ", "), sum)
}
