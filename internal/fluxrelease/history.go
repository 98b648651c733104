// Package fluxrelease reads what a Flux HelmRelease's status says of its past releases.
package fluxrelease

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Remediation is a HelmRelease whose status.history holds releases that failed or were
// uninstalled: the statuses Cozystack's own remediation guard flags
// (cozystack/cozystack main hack/e2e-chainsaw/_lib/remediation-guard.sh:36). Flux clears its
// failure counters on success, so the history is the only lasting trace.
type Remediation struct {
	Namespace, Name string
	// Releases are the remediated entries, oldest first ("v2 failed").
	Releases []string
	// Last is when the newest of them was deployed (its lastDeployed), zero when the history
	// does not say.
	Last time.Time
}

// Count is how many releases were remediated.
func (r Remediation) Count() int { return len(r.Releases) }

func (r Remediation) String() string {
	s := fmt.Sprintf("HelmRelease %s/%s: %d remediated (%s)", r.Namespace, r.Name, r.Count(), strings.Join(r.Releases, ", "))
	if !r.Last.IsZero() {
		s += ", last at " + r.Last.UTC().Format(time.RFC3339)
	}
	return s
}

// Remediations lists every HelmRelease with a failed or uninstalled release in its history,
// sorted by namespace and name.
func Remediations(objs []*unstructured.Unstructured) []Remediation {
	var out []Remediation
	for _, hr := range objs {
		raw, _, _ := unstructured.NestedFieldNoCopy(hr.Object, "status", "history")
		history, _ := raw.([]any)
		r := Remediation{Namespace: hr.GetNamespace(), Name: hr.GetName()}
		// Flux keeps the newest snapshot first.
		for i := len(history) - 1; i >= 0; i-- {
			m, _ := history[i].(map[string]any)
			st, _ := m["status"].(string)
			if st != "failed" && st != "uninstalled" {
				continue
			}
			r.Releases = append(r.Releases, fmt.Sprintf("v%v %s", m["version"], st))
			if s, _ := m["lastDeployed"].(string); s != "" {
				if t, err := time.Parse(time.RFC3339, s); err == nil && t.After(r.Last) {
					r.Last = t
				}
			}
		}
		if r.Count() > 0 {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

// EmptyHistory lists the HelmReleases that report no release at all, sorted.
func EmptyHistory(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, hr := range objs {
		raw, _, _ := unstructured.NestedFieldNoCopy(hr.Object, "status", "history")
		if h, _ := raw.([]any); len(h) == 0 {
			out = append(out, hr.GetNamespace()+"/"+hr.GetName())
		}
	}
	sort.Strings(out)
	return out
}

// Of is the Remediation of one HelmRelease (Count 0 when it has none) and whether its
// status.history is empty.
func Of(hr *unstructured.Unstructured) (Remediation, bool) {
	if rem := Remediations([]*unstructured.Unstructured{hr}); len(rem) == 1 {
		return rem[0], false
	}
	return Remediation{Namespace: hr.GetNamespace(), Name: hr.GetName()}, len(EmptyHistory([]*unstructured.Unstructured{hr})) == 1
}
