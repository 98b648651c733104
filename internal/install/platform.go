package install

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/fluxrelease"
)

// freshListTimeout bounds the one listing that judges the HelmReleases, run even when the
// platform phase is spent, so its verdict can name them.
const freshListTimeout = 10 * time.Second

// builtinClasses are the NodeGroupClasses the platform ships.
func builtinClasses() []string { return []string{"talos", "kairos"} }

// platformAPIServices are the aggregated APIs the platform serves.
func platformAPIServices() []string {
	return []string{"v1alpha1.apps.cozystack.io", "v1alpha1.core.cozystack.io"}
}

// NotReady is one HelmRelease that is not Ready, with the chart's own words.
type NotReady struct {
	Namespace, Name, Status, Reason, Message string
}

func (n NotReady) String() string {
	return fmt.Sprintf("HelmRelease %s/%s Ready=%q (%s): %s", n.Namespace, n.Name, n.Status, n.Reason, n.Message)
}

// HelmReleasesNotReady lists every HelmRelease that is not Ready, sorted.
func HelmReleasesNotReady(objs []*unstructured.Unstructured) []NotReady {
	var out []NotReady
	for _, hr := range objs {
		s, r, m, _ := condition(hr, "Ready")
		if s == "True" {
			continue
		}
		if s == "" {
			s, r, m = "Unknown", "NoReadyCondition", "the helm-controller has not reported yet"
		}
		out = append(out, NotReady{Namespace: hr.GetNamespace(), Name: hr.GetName(), Status: s, Reason: r, Message: m})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

// PlatformGate proves the platform installed: every Package Ready, every HelmRelease Ready,
// confirmed on a fresh listing, the built-in NodeGroupClasses present and the platform's APIs
// Available. On failure it names every HelmRelease that is not Ready, with its message.
// Remediated HelmReleases are reported (the lane's policy.remediation.install: report) or fail
// the gate (fail); Cozystack's own install gate requires only Ready
// (hack/e2e-install-cozystack.bats:281).
func PlatformGate(ctx context.Context, dyn dynamic.Interface, o GateOptions) error {
	if err := PackagesReady(ctx, dyn, o.Disabled, o); err != nil {
		return fmt.Errorf("platform gate: %w", err)
	}
	err := Wait(ctx, dyn, Watch{GVR: gvrHelmRelease}, "every HelmRelease Ready", o.Log, func(objs []*unstructured.Unstructured) (bool, string, error) {
		if len(objs) == 0 {
			return false, "no HelmRelease yet", nil
		}
		nr := HelmReleasesNotReady(objs)
		if len(nr) == 0 {
			return true, "", nil
		}
		return false, fmt.Sprintf("%d of %d not Ready, first %s", len(nr), len(objs), nr[0]), nil
	})
	// The watch's cache is not the verdict: list afresh and judge what the apiserver says now,
	// also when the wait ran out, so the failure names every release with its message.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), freshListTimeout)
	defer cancel()
	fresh, lerr := dyn.Resource(gvrHelmRelease).List(lctx, metav1.ListOptions{})
	if lerr != nil && err == nil {
		return fmt.Errorf("platform gate: list HelmReleases: %w", lerr)
	}
	if lerr == nil {
		objs := items(fresh)
		if nr := HelmReleasesNotReady(objs); len(nr) > 0 {
			lines := make([]string, len(nr))
			for i, n := range nr {
				lines[i] = "  " + n.String()
			}
			return fmt.Errorf("platform gate: %d of %d HelmReleases not Ready on a fresh listing:\n%s", len(nr), len(objs), strings.Join(lines, "\n"))
		}
		if err == nil {
			if rerr := judgeRemediations(objs, o); rerr != nil {
				return rerr
			}
		}
	}
	if err != nil {
		return fmt.Errorf("platform gate: %w", err)
	}
	if err := Present(ctx, dyn, Watch{GVR: gvrNodeClass}, "built-in NodeGroupClasses", builtinClasses(), o); err != nil {
		return fmt.Errorf("platform gate: %w", err)
	}
	if err := APIServicesAvailable(ctx, dyn, platformAPIServices(), o); err != nil {
		return fmt.Errorf("platform gate: %w", err)
	}
	if o.Record != nil {
		fmt.Fprintf(o.Record, "ok     %-24s %d HelmReleases Ready; NodeGroupClasses %s; APIs %s\n", "platform",
			len(items(fresh)), strings.Join(builtinClasses(), ", "), strings.Join(platformAPIServices(), ", "))
	}
	return nil
}

// judgeRemediations applies the lane's install remediation policy to the fresh listing.
func judgeRemediations(objs []*unstructured.Unstructured, o GateOptions) error {
	rem := fluxrelease.Remediations(objs)
	empty := fluxrelease.EmptyHistory(objs)
	if len(rem) > 0 && o.Remediation == lane.RemediationFail {
		lines := make([]string, len(rem))
		for i, r := range rem {
			lines[i] = r.String()
		}
		return fmt.Errorf("platform gate: remediation in HelmRelease history (policy.remediation.install: fail):\n  %s", strings.Join(lines, "\n  "))
	}
	if o.Record != nil {
		for _, r := range rem {
			fmt.Fprintf(o.Record, "info   %-24s %s\n", "remediated", r)
		}
		if len(empty) > 0 {
			fmt.Fprintf(o.Record, "info   %-24s Ready with an empty status.history: %s\n", "no-history", strings.Join(empty, ", "))
		}
	}
	if len(rem) > 0 {
		note := remediationNote(rem)
		logf(o.Log, "platform gate: %s (reported, policy.remediation.install: report)", note)
		if o.Note != nil {
			o.Note(note)
		}
	}
	return nil
}

// Present waits until every named object of w exists.
func Present(ctx context.Context, dyn dynamic.Interface, w Watch, what string, names []string, o GateOptions) error {
	return Wait(ctx, dyn, w, what+" ("+strings.Join(names, ", ")+")", o.Log, func(objs []*unstructured.Unstructured) (bool, string, error) {
		byName := index(objs)
		var missing []string
		for _, n := range names {
			if byName[n] == nil {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0, "missing " + strings.Join(missing, ", "), nil
	})
}

// APIServicesAvailable waits until every named APIService reports Available=True.
func APIServicesAvailable(ctx context.Context, dyn dynamic.Interface, names []string, o GateOptions) error {
	return Wait(ctx, dyn, Watch{GVR: gvrAPIService}, "APIServices Available ("+strings.Join(names, ", ")+")", o.Log, func(objs []*unstructured.Unstructured) (bool, string, error) {
		byName := index(objs)
		var stuck []string
		for _, n := range names {
			u := byName[n]
			if u == nil {
				stuck = append(stuck, "APIService "+n+" not registered yet")
				continue
			}
			if s, r, m, _ := condition(u, "Available"); s != "True" {
				stuck = append(stuck, fmt.Sprintf("APIService %s Available=%q (%s: %s)", n, s, r, m))
			}
		}
		return len(stuck) == 0, strings.Join(stuck, "; "), nil
	})
}

func items(l *unstructured.UnstructuredList) []*unstructured.Unstructured {
	if l == nil {
		return nil
	}
	out := make([]*unstructured.Unstructured, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out
}
