package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed page is what the committed records make: a figure edited in the page alone, or
// a record added without `make perf-doc`, fails here.
func TestPerformanceDocIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	data, err := os.ReadFile(filepath.Join(root, Source))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join(root, Target))
	if err != nil {
		t.Fatal(err)
	}
	if want := Render(f); !bytes.Equal(have, want) {
		t.Fatalf("%s is not what %s makes of it: run make perf-doc and commit the result", Target, Source)
	}
}

func TestParseRefusesAFigureWithoutItsMachineOrCommit(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"no load": {`figures: [{section: s, figure: f, value: 1 s, commit: abcdef1, commitRole: measured, date: 2026-12-04, cores: 2, runs: 1}]`,
			"load is empty"},
		"no cores": {`figures: [{section: s, figure: f, value: 1 s, commit: abcdef1, commitRole: measured, date: 2026-12-04, load: "3", runs: 1}]`,
			"say how many cores"},
		"bad commit": {`figures: [{section: s, figure: f, value: 1 s, commit: main, commitRole: measured, date: 2026-12-04, cores: 2, load: "3", runs: 1}]`,
			`commit "main"`},
		"bad date": {`figures: [{section: s, figure: f, value: 1 s, commit: abcdef1, commitRole: measured, date: yesterday, cores: 2, load: "3", runs: 1}]`,
			`date "yesterday"`},
		"unknown field": {`figures: [{section: s, figure: f, value: 1 s, commit: abcdef1, commitRole: measured, date: 2026-12-04, cores: 2, load: "3", runs: 1, host: x}]`,
			"field host not found"},
		"role": {`figures: [{section: s, figure: f, value: 1 s, commit: abcdef1, commitRole: guessed, date: 2026-12-04, cores: 2, load: "3", runs: 1}]`,
			`commitRole "guessed"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse: %v; want an error containing %q", err, tc.want)
			}
		})
	}
	good := `figures: [{section: Build, figure: "a | b", value: 1 s, commit: abcdef1, commitRole: recorded, date: 2026-12-04, cores: 2, load: "3", runs: 0}]`
	f, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	page := string(Render(f))
	for _, want := range []string{"## Build", `| a \| b | 1 s | not recorded | 2 cores, load 3 | in ` + "`abcdef1`" + ` | 2026-12-04 |`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
}
