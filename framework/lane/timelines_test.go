package lane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// simLifecycle is lanes/sim-lifecycle.yaml, its three timelines (refusals, join, lifecycle),
// with each replacement in edits made first.
func simLifecycle(t *testing.T, edits ...string) (*Lane, error) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "lanes", "sim-lifecycle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			t.Fatalf("lanes/sim-lifecycle.yaml has no %q to replace; update the test", edits[i])
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	return Parse("lanes/sim-lifecycle.yaml", []byte(s))
}

// The clusters' own timelines count as parallel: the budget sums the shared phases and the
// longest timeline; a phase keeps for later only its own timeline's rest and the shared phases
// after every timeline; a shared phase before them keeps the longest.
func TestTimelinesAreBudgetedSideBySide(t *testing.T) {
	l, err := simLifecycle(t)
	if err != nil {
		t.Fatal(err)
	}
	b := l.Budget
	idx := func(cluster, name string) int {
		i := b.PhaseOn(cluster, name)
		if i < 0 {
			t.Fatalf("no phase %s on %q", name, cluster)
		}
		return i
	}
	m := time.Minute
	a := b.Arithmetic()
	// preflight 10s, cluster 2m, tenant 3m; lifecycle 3+5+5m30s+4; deletion 3m30s, teardown 1m.
	after := 4*m + 30*time.Second
	life := 17*m + 30*time.Second
	if want := 10*time.Second + 5*m + life + after; a.Phases != want || a.Longest != "lifecycle" || a.Timelines != life || a.Beside != 4*m {
		t.Errorf("arithmetic: phases %s, longest %s %s, beside %s; want %s, lifecycle 17m30s, 4m (join 3m + refusals 1m)", a.Phases, a.Longest, a.Timelines, a.Beside, want)
	}
	for _, c := range []struct {
		cluster, name string
		want          time.Duration
	}{
		{"", "tenant", life + after},
		{"join", "pools", after},
		{"refusals", "refusals", after},
		{"lifecycle", "pools", life - 3*m + after},
		{"lifecycle", "remediation", life - 8*m + after},
		{"", "deletion", 1 * m},
	} {
		if got := b.ReserveAfter(idx(c.cluster, c.name)); got != c.want {
			t.Errorf("phase %s on %q keeps %s for the phases after it; want %s", c.name, c.cluster, got, c.want)
		}
	}
	if i := b.PhaseOn("", "pools"); i >= 0 {
		t.Errorf("pools, on two timelines, found without one: phase %d", i)
	}
	if i := b.PhaseOn("join", "deletion"); i < 0 || b.Phases[i].Cluster != "" {
		t.Errorf("a shared phase is not found from a timeline: %d", i)
	}
	if i := b.PhaseOn("", "remediation"); i < 0 || b.Phases[i].Cluster != "lifecycle" {
		t.Errorf("a phase on one timeline only is not found by its name: %d", i)
	}
}

// What the clock cannot run as written is refused, naming the phase.
func TestTimelinesAreRefusedWhereTheClockCannotRunThem(t *testing.T) {
	for _, c := range []struct {
		name  string
		edits []string
		want  string
	}{
		{"a shared phase among them", []string{"    - name: remediation\n      cluster: lifecycle\n", "    - name: remediation\n"},
			"names no cluster but sits between phases that do"},
		{"a shared pools phase", []string{"    - name: pools\n      cluster: join\n", "    - name: pools\n"},
			"a shared pools phase beside phases that name a cluster"},
		{"a phase twice on one timeline", []string{"    - name: pools\n      cluster: join\n", "    - name: pools\n      cluster: lifecycle\n"},
			`budget.phases[5].name: "pools" is declared twice`},
		{"an unknown cluster", []string{"    - name: refusals\n      cluster: refusals\n", "    - name: refusals\n      cluster: nosuch\n"},
			`"nosuch" is not a conformance cluster of the lane`},
		{"a cluster with pools and no pools phase", []string{"  - name: md0\n    cluster: join\n", "  - name: md0\n    cluster: other\n"},
			"cluster other has pools but no pools phase of its own"},
		{"timelines before the tenant phase", []string{"    - name: tenant\n      ceiling: 3m\n", "    - name: tenant\n      cluster: join\n      ceiling: 3m\n"},
			"must come after the shared tenant phase"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := simLifecycle(t, c.edits...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant an error with %q", err, c.want)
			}
		})
	}
}

// A lifecycle spec's phase must be on the timeline of the cluster whose pool it acts on (or
// shared), and the tenant's deletion shared.
func TestSuitePhasesAreHeldToTheirClustersTimeline(t *testing.T) {
	l, err := simLifecycle(t)
	if err != nil {
		t.Fatal(err)
	}
	ok := SuiteCatalog{"kubernetes": {{Name: "pools"}, {Name: "remediation", Cluster: "lifecycle"}, {Name: "deletion", Shared: true}}}
	if errs := l.CheckSuites(ok); len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	wrong := SuiteCatalog{"kubernetes": {{Name: "remediation", Cluster: "join"}}}
	if errs := l.CheckSuites(wrong); len(errs) != 1 || !strings.Contains(errs.Error(), `has no phase "remediation" shared or on cluster join's timeline`) {
		t.Errorf("a lifecycle phase on another cluster's timeline: %v", errs)
	}
	timed := SuiteCatalog{"kubernetes": {{Name: "pools", Shared: true}}}
	if errs := l.CheckSuites(timed); len(errs) != 2 || !strings.Contains(errs.Error(), "acts on every cluster at once: it is a shared phase") {
		t.Errorf("a shared need on the timelines: %v", errs)
	}
}
