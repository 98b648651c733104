package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Scenario is one run of the benchmark: the sim lane with its first pool (md0) at Workers
// replicas, or with Pools one-worker Talos pools (md0 and sp01...) beside its Kairos pools.
type Scenario struct {
	// Workers is md0's replicas when Pools is 0.
	Workers int `json:"workers"`
	// Pools is how many one-worker pools of md0's class the lane has (md0 counts as one).
	Pools int `json:"pools,omitempty"`
}

// Name is the generated lane's name: scale-w8, scale-p16.
func (s Scenario) Name() string {
	if s.Pools > 0 {
		return fmt.Sprintf("scale-p%d", s.Pools)
	}
	return fmt.Sprintf("scale-w%d", s.Workers)
}

// Label says it for a table: "md0 x 8", "16 pools x 1".
func (s Scenario) Label() string {
	if s.Pools > 0 {
		return fmt.Sprintf("%d pools x 1", s.Pools)
	}
	return fmt.Sprintf("md0 x %d", s.Workers)
}

// Scaled is how many workers the scenario scales: md0's, or its one-worker pools'.
func (s Scenario) Scaled() int {
	if s.Pools > 0 {
		return s.Pools
	}
	return s.Workers
}

// ScaledPools are the names of the pools the scenario scales (the others are the lane's own).
func (s Scenario) ScaledPools() []string {
	out := []string{"md0"}
	for i := 1; i < s.Pools; i++ {
		out = append(out, fmt.Sprintf("sp%02d", i))
	}
	return out
}

// DefaultScale is every scenario of the benchmark.
const DefaultScale = "1,8,32,64,4p,16p"

// ParseScale reads a comma-separated list: N is md0 at N workers, Np is N one-worker pools (1p is
// md0 at 1 worker, run once). The 1-worker run, which the ratios are to, is always run first.
func ParseScale(v string) ([]Scenario, error) {
	out := []Scenario{{Workers: 1}}
	seen := map[Scenario]bool{{Workers: 1}: true}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		pools := strings.HasSuffix(f, "p")
		n, err := strconv.Atoi(strings.TrimSuffix(f, "p"))
		if err != nil || n < 1 || n > 99 {
			return nil, fmt.Errorf("SCALE: %q is neither a worker count (8) nor a pool count (16p), from 1 to 99", f)
		}
		s := Scenario{Workers: n}
		if pools && n > 1 {
			s = Scenario{Workers: 1, Pools: n}
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// Generous ceilings: a benchmark measures how long a run takes, it does not judge it against the
// sim lane's budget, whose pools and teardown ceilings would cut a 64-worker run short on a
// loaded machine (Cluster API deletes a pool's Machines as it makes them, and each deleted VM
// goes through CAPK, virt-controller and the launcher's end).
const (
	poolsCeiling    = "10m"
	teardownCeiling = "5m"
	jobCap          = "23m"
)

// WriteLane writes the scenario's lane into dir from the sim lane's file base: its name, its
// first pool's replicas or one-worker pools beside it, and room in the budget; everything else
// as the sim lane has it. It returns the file's path.
func WriteLane(base []byte, dir string, s Scenario) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(base, &doc); err != nil {
		return "", fmt.Errorf("the sim lane: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return "", fmt.Errorf("the sim lane is not one YAML document")
	}
	root := doc.Content[0]
	set(root, "name", s.Name())
	set(root, "description", fmt.Sprintf("The sim lane with %s, for make scale-bench.", s.Label()))
	pools := get(root, "pools")
	if pools == nil || pools.Kind != yaml.SequenceNode || len(pools.Content) == 0 {
		return "", fmt.Errorf("the sim lane has no pools")
	}
	md0 := pools.Content[0]
	if n := get(md0, "name"); n == nil || n.Value != "md0" {
		return "", fmt.Errorf("the sim lane's first pool is not md0")
	}
	if s.Pools == 0 {
		set(md0, "replicas", strconv.Itoa(s.Workers))
	} else {
		set(md0, "replicas", "1")
		class := get(md0, "class").Value
		var extra []*yaml.Node
		for _, name := range s.ScaledPools()[1:] {
			p := &yaml.Node{Kind: yaml.MappingNode}
			set(p, "name", name)
			set(p, "class", class)
			set(p, "replicas", "1")
			extra = append(extra, p)
		}
		pools.Content = append(pools.Content[:1], append(extra, pools.Content[1:]...)...)
	}
	budget := get(root, "budget")
	if budget == nil {
		return "", fmt.Errorf("the sim lane has no budget")
	}
	set(budget, "jobCap", jobCap)
	found := 0
	if phases := get(budget, "phases"); phases != nil {
		for _, ph := range phases.Content {
			switch n := get(ph, "name"); {
			case n != nil && n.Value == "pools":
				set(ph, "ceiling", poolsCeiling)
				found++
			case n != nil && n.Value == "teardown":
				set(ph, "ceiling", teardownCeiling)
				found++
			}
		}
	}
	if found != 2 {
		return "", fmt.Errorf("the sim lane's budget lacks phase pools or teardown")
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, s.Name()+".yaml")
	return path, os.WriteFile(path, out, 0o644)
}

func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func set(m *yaml.Node, key, value string) {
	if v := get(m, key); v != nil {
		*v = yaml.Node{Kind: yaml.ScalarNode, Value: value}
		return
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &yaml.Node{Kind: yaml.ScalarNode, Value: value})
}
