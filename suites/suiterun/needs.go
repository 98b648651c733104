package suiterun

import (
	"bytes"
	"fmt"
	"os"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// NeedsFile is the file, in a suite's folder, that says what the suite needs of a lane when
// its Config.Phases is nil: the orchestrator runs the suite in its folder, and lanes-check
// reads it there (internal/registry).
const NeedsFile = "suite.yaml"

// Needs is what a suite declares of itself as data (NeedsFile): its name and the lane phases
// it runs in, in order. Its peak of worker VMs is the lane's pools, every pool at once: a suite
// that adds workers declares them in Go (internal/registry).
type Needs struct {
	Name   string  `yaml:"name"`
	Phases []Phase `yaml:"phases"`
}

// Phase is one lane phase a suite runs in.
type Phase struct {
	Name string `yaml:"name"`
	// PerPool: the suite enters the phase once per pool, each time with its full ceiling
	// (lane.PhaseNeed.PerPool).
	PerPool bool `yaml:"perPool"`
}

// ReadNeeds reads a suite's NeedsFile at path; every problem names the file and the field.
func ReadNeeds(path string) (Needs, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Needs{}, fmt.Errorf("suite needs: %w (a suite without Config.Phases declares its phases there)", err)
	}
	var n Needs
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&n); err != nil {
		return Needs{}, fmt.Errorf("%s: %v", path, err)
	}
	if n.Name == "" {
		return Needs{}, fmt.Errorf("%s: name: is required (the suite's name, as lanes name it)", path)
	}
	if len(n.Phases) == 0 {
		return Needs{}, fmt.Errorf("%s: phases: names no phase (a suite runs at least in tenant, pools and teardown)", path)
	}
	for i, p := range n.Phases {
		if p.Name == "" {
			return Needs{}, fmt.Errorf("%s: phases[%d].name: is required", path, i)
		}
	}
	return n, nil
}

// PhaseNeeds is n's phases as lanes-check holds a lane to them.
func (n Needs) PhaseNeeds() []lane.PhaseNeed {
	out := make([]lane.PhaseNeed, 0, len(n.Phases))
	for _, p := range n.Phases {
		out = append(out, lane.PhaseNeed{Name: p.Name, PerPool: p.PerPool})
	}
	return out
}
