package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/registry"
)

func TestParseScaleRunsTheOneWorkerLaneFirstAndOnce(t *testing.T) {
	got, err := ParseScale("8,1,1p,16p,8")
	if err != nil {
		t.Fatal(err)
	}
	want := []Scenario{{Workers: 1}, {Workers: 8}, {Workers: 1, Pools: 16}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseScale: got %+v, want %+v", got, want)
	}
	for _, bad := range []string{"x", "0", "100", "4q", "-1p"} {
		if _, err := ParseScale(bad); err == nil {
			t.Errorf("ParseScale(%q): accepted", bad)
		}
	}
}

// Every lane the benchmark generates is a sim lane the lane check accepts, capacity included:
// the default sim holds a 64-worker pool beside the sim lane's others, and 16 one-worker pools.
func TestTheBenchmarksLanesPassTheLaneCheck(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "..", "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	scenarios, err := ParseScale(DefaultScale)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, s := range scenarios {
		path, err := WriteLane(base, dir, s)
		if err != nil {
			t.Fatal(err)
		}
		l, err := lane.Load(path)
		if err != nil {
			t.Fatalf("%s: %v", s.Label(), err)
		}
		if err := registry.Check(l); err != nil {
			t.Fatalf("%s: the lane check refused it: %v", s.Label(), err)
		}
		var scaled []string
		workers := 0
		for _, p := range l.Pools {
			if p.Class == "talos" {
				scaled = append(scaled, p.Name)
				workers += p.Replicas
			}
		}
		if !reflect.DeepEqual(scaled, s.ScaledPools()) || workers != s.Scaled() {
			t.Fatalf("%s: talos pools %v with %d workers; want %v with %d", s.Label(), scaled, workers, s.ScaledPools(), s.Scaled())
		}
		if l.Name != s.Name() || len(l.Pools) != len(s.ScaledPools())+2 {
			t.Fatalf("%s: lane %s with %d pools", s.Label(), l.Name, len(l.Pools))
		}
	}
}
