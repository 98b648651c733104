package verdict

import "slices"

// Cluster is one conformance cluster of the run (a Kubernetes app of the tenant at its own
// tenant Kubernetes release) and the verdict on its pools alone: a failure of another
// cluster's pools never touches it.
type Cluster struct {
	Name string `json:"name"`
	// Version is the app's version key ("v1.34"), Patch the release its workers report.
	Version string   `json:"version"`
	Patch   string   `json:"patch"`
	Pools   []string `json:"pools"`
	// Result is pass, fail or soft-fail by its pools' failures (interrupted when the run was
	// and none of them failed first); Failures counts them.
	Result   Result `json:"result"`
	Failures int    `json:"failures"`
}

// judgeClusters gives each cluster the verdict of the failures of its own pools (fs, already
// marked soft or hard).
func judgeClusters(cs []Cluster, fs []Failure, interrupted bool) []Cluster {
	out := make([]Cluster, 0, len(cs))
	for _, c := range cs {
		hard, soft := 0, 0
		for _, f := range fs {
			if f.Pool == "" || !slices.Contains(c.Pools, f.Pool) {
				continue
			}
			if f.Soft {
				soft++
			} else {
				hard++
			}
		}
		c.Failures = hard + soft
		switch {
		case hard > 0:
			c.Result = Fail
		case soft > 0:
			c.Result = SoftFail
		case interrupted:
			c.Result = Interrupted
		default:
			c.Result = Pass
		}
		out = append(out, c)
	}
	return out
}
