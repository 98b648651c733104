package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// timelineEntry is one line of a pool's timeline.jsonl (internal/diag): an object's change with
// the fields and conditions the harness follows.
type timelineEntry struct {
	At         time.Time         `json:"at"`
	Cluster    string            `json:"cluster"`
	Kind       string            `json:"kind"`
	Name       string            `json:"name"`
	Change     string            `json:"change"`
	Fields     map[string]string `json:"fields"`
	Conditions []struct {
		Type   string `json:"type"`
		Status string `json:"status"`
	} `json:"conditions"`
}

// Step is one hand-over on a worker's way from its Machine to its Node, named by whoever acts
// in it; its seconds are measured per worker, from the moment before to the moment it ends.
type Step struct {
	Name string `json:"step"`
	// By is who spends the time: an upstream controller or a stand-in.
	By     string  `json:"by"`
	N      int     `json:"workers"`
	Median float64 `json:"medianSeconds"`
	Max    float64 `json:"maxSeconds"`
}

// MachinesCreated is the step, per pool, from its first bootstrap config to its last Machine:
// Cluster API's MachineSet creates them in one loop.
const MachinesCreated = "a pool's Machines created, first to last"

// moment is one thing a worker's objects show; a step runs from one moment to the next.
type moment struct {
	key, step, by string
	seen          func(e timelineEntry) bool
}

// moments are a worker's moments, in order.
func moments() []moment {
	return []moment{
		{"machine", "", "", func(e timelineEntry) bool { return e.Kind == "Machine" && e.Change == "added" }},
		{"bootstrap", "Machine to bootstrap data", "CABPT (TalosConfig dataSecretName)",
			func(e timelineEntry) bool { return e.Kind == "TalosConfig" && e.Fields["dataSecretName"] != "" }},
		{"bootstrapReady", "bootstrap data to Machine bootstrap ready", "Cluster API Machine controller",
			func(e timelineEntry) bool {
				return e.Kind == "Machine" && e.Fields["bootstrapDataSecretCreated"] == "true"
			}},
		{"vm", "bootstrap ready to VirtualMachine", "CAPK KubevirtMachine controller",
			func(e timelineEntry) bool { return e.Kind == "VirtualMachine" && e.Change == "added" }},
		{"vmiReady", "VirtualMachine to VMI Ready", "KubeVirt and CDI (disk import, launcher)",
			func(e timelineEntry) bool { return e.Kind == "VirtualMachineInstance" && condTrue(e, "Ready") }},
		{"node", "VMI Ready to Node registered", "guest stand-in (boot, join latencies)",
			func(e timelineEntry) bool { return e.Cluster == "tenant" && e.Kind == "Node" && e.Change == "added" }},
		{"providerID", "Node registered to providerID", "CAPK KubevirtMachine controller (requeue)",
			func(e timelineEntry) bool {
				return e.Cluster == "tenant" && e.Kind == "Node" && e.Fields["providerID"] != ""
			}},
		{"nodeRef", "providerID to Machine nodeRef", "Cluster API Machine controller",
			func(e timelineEntry) bool { return e.Kind == "Machine" && e.Fields["nodeRef"] != "" }},
	}
}

func condTrue(e timelineEntry, t string) bool {
	for _, c := range e.Conditions {
		if c.Type == t && c.Status == "True" {
			return true
		}
	}
	return false
}

// Attribute reads the scaled pools' timelines in artifacts and says, per step, how long the
// workers took in it: the first time each moment showed for each worker (a Machine's objects
// share its name).
func Attribute(artifacts string, pools []string) ([]Step, error) {
	first := map[string]map[string]time.Time{} // worker -> moment -> at
	var creating []float64                     // per pool: its first bootstrap config to its last Machine
	for _, pool := range pools {
		var from, to time.Time
		f, err := os.Open(filepath.Join(artifacts, "pools", pool, "timeline.jsonl"))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e timelineEntry
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			if e.Change == "added" && e.Kind == "TalosConfig" && from.IsZero() {
				from = e.At
			}
			if e.Change == "added" && e.Kind == "Machine" {
				to = e.At
			}
			for _, m := range moments() {
				if !m.seen(e) {
					continue
				}
				w := first[e.Name]
				if w == nil {
					w = map[string]time.Time{}
					first[e.Name] = w
				}
				if _, ok := w[m.key]; !ok {
					w[m.key] = e.At
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
		if !from.IsZero() && to.After(from) {
			creating = append(creating, to.Sub(from).Seconds())
		}
	}
	var steps []Step
	if len(creating) > 0 {
		sort.Float64s(creating)
		steps = append(steps, Step{Name: MachinesCreated, By: "Cluster API MachineSet controller (one Machine after another)",
			N: len(creating), Median: median(creating), Max: creating[len(creating)-1]})
	}
	moments := moments()
	for i := 1; i < len(moments); i++ {
		var v []float64
		for _, w := range first {
			from, ok1 := w[moments[i-1].key]
			to, ok2 := w[moments[i].key]
			if _, machine := w["machine"]; ok1 && ok2 && machine {
				v = append(v, to.Sub(from).Seconds())
			}
		}
		if len(v) == 0 {
			continue
		}
		sort.Float64s(v)
		steps = append(steps, Step{Name: moments[i].step, By: moments[i].by, N: len(v), Median: median(v), Max: v[len(v)-1]})
	}
	return steps, nil
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
