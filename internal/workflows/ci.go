package workflows

import (
	"fmt"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// CIPath is the workflow that runs the unit tests and every sim lane on each change.
const CIPath = ".github/workflows/ci.yaml"

// CheckCI holds the CI workflow (ci, CIPath's content) to the sim lanes: each must be run by a
// step (bin/e2e run --lane <its name, or its file relative to root, the checkout>), so a sim
// lane added is a sim lane CI runs.
func CheckCI(ci []byte, lanes []*lane.Lane, root string) error {
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(ci, &wf); err != nil {
		return fmt.Errorf("%s: %v", CIPath, err)
	}
	var runs []string
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			runs = append(runs, strings.Fields(s.Run)...)
		}
	}
	ran := map[string]bool{}
	for i := 0; i+1 < len(runs); i++ {
		if runs[i] == "--lane" {
			ran[runs[i+1]] = true
		}
	}
	var missing []string
	for _, l := range lanes {
		file := l.File
		if rel, err := filepath.Rel(root, l.File); err == nil {
			file = filepath.ToSlash(rel)
		}
		arg := file
		if strings.HasPrefix(file, "lanes/") {
			arg = l.Name
		}
		if l.Substrate == lane.SubstrateSim && !ran[l.Name] && !ran[file] {
			missing = append(missing, fmt.Sprintf("%s (a step: bin/e2e run --lane %s)", file, arg))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s runs no step for the sim lane(s) %s; add the step and its artifacts' upload", CIPath, strings.Join(missing, ", "))
	}
	return nil
}
