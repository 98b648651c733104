package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Each step is measured per worker between its own moments, whoever else is slower.
func TestAttributeMeasuresEachWorkersHandOvers(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "pools", "md0"), 0o755); err != nil {
		t.Fatal(err)
	}
	lines := `{"at":"2026-12-04T10:00:00Z","cluster":"management","kind":"TalosConfig","name":"m1","change":"added"}
{"at":"2026-12-04T10:00:00Z","cluster":"management","kind":"Machine","name":"m1","change":"added"}
{"at":"2026-12-04T10:00:01Z","cluster":"management","kind":"Machine","name":"m2","change":"added"}
{"at":"2026-12-04T10:00:02Z","cluster":"management","kind":"TalosConfig","name":"m1","change":"changed","fields":{"dataSecretName":"m1-bootstrap-data"}}
{"at":"2026-12-04T10:00:09Z","cluster":"management","kind":"TalosConfig","name":"m2","change":"changed","fields":{"dataSecretName":"m2-bootstrap-data"}}
{"at":"2026-12-04T10:00:20Z","cluster":"tenant","kind":"Node","name":"m1","change":"added"}
{"at":"2026-12-04T10:00:25Z","cluster":"tenant","kind":"Node","name":"m1","change":"changed","fields":{"providerID":"kubevirt://m1"}}
{"at":"2026-12-04T10:00:26Z","cluster":"tenant","kind":"Node","name":"m1","change":"changed","fields":{"providerID":"kubevirt://m1"}}
`
	if err := os.WriteFile(filepath.Join(dir, "pools", "md0", "timeline.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	steps, err := Attribute(dir, []string{"md0"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Step{}
	for _, s := range steps {
		got[s.Name] = s
	}
	if s := got["Machine to bootstrap data"]; s.N != 2 || s.Median != 5 || s.Max != 8 {
		t.Fatalf("Machine to bootstrap data: %+v; want 2 workers, median 5 s, max 8 s", s)
	}
	if s := got["Node registered to providerID"]; s.N != 1 || s.Max != 5 {
		t.Fatalf("Node registered to providerID: %+v; want 1 worker, 5 s (the first providerID seen)", s)
	}
	if s := got[MachinesCreated]; s.N != 1 || s.Max != 1 {
		t.Fatalf("%s: %+v; want 1 pool, 1 s", MachinesCreated, s)
	}
	if _, ok := got["bootstrap data to Machine bootstrap ready"]; ok {
		t.Fatalf("a step with no worker's moments is reported: %+v", steps)
	}
}
