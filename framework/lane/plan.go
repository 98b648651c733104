package lane

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WritePlan prints the whole ordered plan of a lane without touching a cluster: phases with
// their ceilings and latest ends, pins, classes and pools, suites, policy, and the artifacts a
// run leaves.
func WritePlan(w io.Writer, l *Lane) {
	a := l.Budget.Arithmetic()
	fmt.Fprintf(w, "lane %s (%s substrate), tenant Kubernetes %s (kubelet %s)\n", l.Name, l.Substrate, l.Kubernetes.Version, l.Kubernetes.Patch)
	fmt.Fprintf(w, "job cap %s: phases %s + diagnostics reserve %s + artifact reserve %s + margin %s = %s (headroom %s)\n\n",
		a.Cap, a.Phases, a.Diagnostics, a.Artifacts, a.Margin, a.Total, a.Headroom)

	fmt.Fprintln(w, "phases (offset from job start: latest end if every phase before used its ceiling)")
	var at time.Duration
	for i, p := range l.Budget.Phases {
		at += p.Ceiling.D()
		line := fmt.Sprintf("  %d. %-12s ceiling %-7s by +%s", i+1, p.Name, p.Ceiling, at)
		if p.Note != "" {
			line += "  " + p.Note
		}
		fmt.Fprintln(w, line)
		for _, name := range sortedKeys(p.Timeouts) {
			fmt.Fprintf(w, "       timeout %s %s\n", name, p.Timeouts[name])
		}
	}
	fmt.Fprintf(w, "  then diagnostics (on failure) within %s, artifacts within %s\n\n", l.Budget.DiagnosticsReserve, l.Budget.ArtifactReserve)

	if len(l.Components) > 0 {
		fmt.Fprintln(w, "components")
		for _, c := range l.Components {
			pin := c.Version
			if c.Image != "" {
				pin += "  " + c.Image + "@" + c.Digest
			} else if c.Digest != "" {
				pin += "  " + c.Digest
			}
			if c.Source != "" {
				pin += "  from " + c.Source
			}
			fmt.Fprintf(w, "  %-28s %s\n", c.Name, pin)
			if c.Digest == DigestUnknown {
				fmt.Fprintf(w, "  %-28s   digest not pinned yet: %s\n", "", c.Note)
			}
		}
		fmt.Fprintln(w)
	}
	for _, c := range l.Classes {
		fmt.Fprintf(w, "class %s: os %s", c.Name, c.OS)
		if c.Image != "" {
			fmt.Fprintf(w, ", image %s, Kubernetes %s", c.Image, c.KubernetesVersion)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "pools (in parallel)")
	for _, p := range l.Pools {
		fmt.Fprintf(w, "  %-10s class %-12s replicas %d\n", p.Name, p.Class, p.Replicas)
	}
	fmt.Fprintf(w, "workload %s\n\n", l.Workload.Ref())
	fmt.Fprintln(w, "suites")
	for _, s := range l.Suites {
		filter := s.LabelFilter
		if filter == "" {
			filter = "(all specs)"
		}
		fmt.Fprintf(w, "  %-12s label filter %s\n", s.Name, filter)
	}
	soft := "none"
	if len(l.Policy.Soft) > 0 {
		soft = strings.Join(l.Policy.Soft, ", ")
	}
	fmt.Fprintf(w, "soft failure classes: %s\n\n", soft)
	fmt.Fprintln(w, "artifacts ($E2E_ARTIFACTS, default _artifacts/<lane>-<UTC time>/)")
	for _, f := range []string{"junit.xml", "verdict.json", "timings.json", "summary.md", "manifest.json", "repro.txt"} {
		fmt.Fprintf(w, "  %s\n", f)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
