package diag

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
)

// Status is how a collector or stream ended.
type Status string

const (
	// Complete: everything the collector looks at was written.
	Complete Status = "complete"
	// Truncated: a bound (time, bytes, count) cut it; what was written is kept.
	Truncated Status = "truncated"
	// Failed: it could not do its work (an API error, a missing kind); Error says why.
	Failed Status = "failed"
	// Declined: it was not started, because the time left could not hold its bound.
	Declined Status = "declined"
)

// Bound is what a collector was allowed.
type Bound struct {
	Seconds budget.Seconds `json:"seconds,omitempty"`
	Bytes   int64          `json:"bytes,omitempty"`
	Count   int            `json:"count,omitempty"`
}

// Entry is one collector's or stream's line in manifest.json.
type Entry struct {
	// Name is the collector ("disk-import", "stream console") and Scope what it looked at
	// ("pool md0", "cluster tenant", "run").
	Name  string `json:"name"`
	Scope string `json:"scope"`
	// Process is who ran it: "harness" or the suite's name.
	Process  string         `json:"process,omitempty"`
	Status   Status         `json:"status"`
	Bound    Bound          `json:"bound"`
	Start    time.Time      `json:"start"`
	Duration budget.Seconds `json:"durationSeconds"`
	Bytes    int64          `json:"bytes"`
	Items    int            `json:"items"`
	// Paths are the files it wrote, relative to the artifacts folder.
	Paths []string `json:"paths,omitempty"`
	// Error says why it failed, was declined or truncated.
	Error string `json:"error,omitempty"`
	// Notes are facts worth reading beside the files ("kind KairosConfig not served").
	Notes []string `json:"notes,omitempty"`
}

// Manifest is manifest.json: every collector and stream of a run, in the order they ended.
// It is safe for concurrent use.
type Manifest struct {
	mu      sync.Mutex
	entries []Entry
}

// NewManifest returns an empty manifest.
func NewManifest() *Manifest { return &Manifest{} }

// Add records e.
func (m *Manifest) Add(e Entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries = append(m.entries, e)
}

// Entries is a copy of the entries, in start order.
func (m *Manifest) Entries() []Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := append([]Entry(nil), m.entries...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Merge adds another process's entries (a suite's manifest.json).
func (m *Manifest) Merge(entries []Entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries = append(m.entries, entries...)
}

// file is manifest.json's shape.
type file struct {
	Entries []Entry `json:"entries"`
	// Counts by status, for a reader who wants the gist.
	Counts map[Status]int `json:"counts"`
}

// Write writes the manifest as JSON to path (no Secret can be in it: it holds names and times).
func (m *Manifest) Write(path string) error {
	entries := m.Entries()
	if entries == nil {
		entries = []Entry{}
	}
	counts := map[Status]int{Complete: 0, Truncated: 0, Failed: 0, Declined: 0}
	for _, e := range entries {
		counts[e.Status]++
	}
	data, err := json.MarshalIndent(file{Entries: entries, Counts: counts}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadManifest reads a manifest.json.
func ReadManifest(path string) ([]Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Entries, nil
}
