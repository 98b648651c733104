package kubernetes

import (
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

func laneWith(name, filter string) *lane.Lane {
	return &lane.Lane{Name: name, Suites: []lane.Suite{{Name: Name, LabelFilter: filter}}}
}

// A lane's label filter decides which specs run, and so which phases the suite needs of it.
func TestTheLabelFilterDecidesThePhases(t *testing.T) {
	names := func(l *lane.Lane) string {
		needs, err := Phases(l)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range needs {
			out = append(out, n.Name)
		}
		return strings.Join(out, " ")
	}
	for filter, want := range map[string]string{
		"":                          "tenant pools refusals remediation scaling rollout deletion teardown",
		"!lifecycle":                "tenant pools refusals teardown",
		"!refusals":                 "tenant pools remediation scaling rollout deletion teardown",
		"!refusals && !rollout":     "tenant pools remediation scaling deletion teardown",
		"lane:other || remediation": "tenant pools remediation teardown",
	} {
		if got := names(laneWith("sim", filter)); got != want {
			t.Errorf("filter %q: %s, want %s", filter, got, want)
		}
	}
	if _, err := Phases(laneWith("sim", "&&")); err == nil {
		t.Error("a filter that does not parse was accepted")
	}
}
