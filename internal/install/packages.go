package install

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

var gvrPackage = schema.GroupVersionResource{Group: "cozystack.io", Version: "v1alpha1", Resource: "packages"}

// PackageState is one Package as the operator reports it.
type PackageState struct {
	Name            string
	Ready           string // "True", "False", "" (not reported yet)
	Reason, Message string
	// Waiting are the dependencies status.dependencies marks not ready.
	Waiting []string
}

func packageState(u *unstructured.Unstructured) PackageState {
	s, r, m, _ := condition(u, "Ready")
	st := PackageState{Name: u.GetName(), Ready: s, Reason: r, Message: m}
	deps, _, _ := unstructured.NestedMap(u.Object, "status", "dependencies")
	for name, v := range deps {
		if ready, _ := v.(map[string]any)["ready"].(bool); !ready {
			st.Waiting = append(st.Waiting, name)
		}
	}
	sort.Strings(st.Waiting)
	return st
}

// orphans finds the Packages blocked for good: Ready=False DependenciesNotReady because a
// dependency, directly or through other blocked Packages, is a Package the lane disabled and
// that does not exist. Each comes with its chain from the disabled Package, longest first. It
// decides only once the operator has reported on every Package, so the chains are whole; a
// dependency that is merely missing so far is not an orphan's cause.
func orphans(objs []*unstructured.Unstructured, disabled map[string]bool) [][]string {
	state := map[string]PackageState{}
	for _, u := range objs {
		st := packageState(u)
		if st.Ready == "" {
			return nil
		}
		state[u.GetName()] = st
	}
	var walk func(name string, seen map[string]bool) []string
	walk = func(name string, seen map[string]bool) []string {
		st, ok := state[name]
		if !ok {
			if disabled[name] {
				return []string{name}
			}
			return nil
		}
		if seen[name] || st.Ready == "True" || st.Reason != assumptions.DependenciesNotReady {
			return nil
		}
		seen[name] = true
		for _, d := range st.Waiting {
			if chain := walk(d, seen); chain != nil {
				return append(chain, name)
			}
		}
		return nil
	}
	names := make([]string, 0, len(state))
	for n := range state {
		names = append(names, n)
	}
	sort.Strings(names)
	var out [][]string
	for _, n := range names {
		if chain := walk(n, map[string]bool{}); chain != nil {
			out = append(out, chain)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// orphanError is the configuration failure orphaned Packages are: the longest chain in full,
// the other orphans by name.
func orphanError(chains [][]string) error {
	chain := chains[0]
	msg := fmt.Sprintf("Package %s is Ready=False and gets no HelmRelease: %s is disabled by the lane (platform.disabledPackages) and %s",
		chain[len(chain)-1], chain[0], describeChain(chain))
	if len(chains) > 1 {
		var others []string
		for _, c := range chains[1:] {
			others = append(others, c[len(c)-1])
		}
		msg += fmt.Sprintf("; orphaned as well: %s", strings.Join(others, ", "))
	}
	msg += "; the platform source's dependencies differ from the graph the harness checked the lane against (internal/install/assumptions)"
	return &substrate.ConfigurationError{Err: errors.New(msg)}
}

func describeChain(chain []string) string {
	var parts []string
	for i := 1; i < len(chain); i++ {
		parts = append(parts, chain[i]+" waits on "+chain[i-1])
	}
	return strings.Join(parts, ", ")
}

// PackagesReady waits until every Package reports Ready=True: the operator has created its
// HelmReleases (internal/operator/package_reconciler.go:357-364). A Package left without a
// dependency because the lane disabled it ends the wait at once as a configuration failure
// naming the chain; any other Package still waiting is named with what it waits on.
func PackagesReady(ctx context.Context, dyn dynamic.Interface, disabled []string, o GateOptions) error {
	off := map[string]bool{}
	for _, d := range disabled {
		off[d] = true
	}
	return Wait(ctx, dyn, Watch{GVR: gvrPackage}, "every Package Ready (its HelmReleases created)", o.Log, func(objs []*unstructured.Unstructured) (bool, string, error) {
		if len(objs) == 0 {
			return false, "no Package yet", nil
		}
		if chains := orphans(objs, off); chains != nil {
			return false, "", orphanError(chains)
		}
		var stuck []string
		for _, u := range objs {
			st := packageState(u)
			if st.Ready == "True" {
				continue
			}
			line := fmt.Sprintf("Package %s Ready=%q (%s: %s)", st.Name, st.Ready, st.Reason, st.Message)
			if len(st.Waiting) > 0 {
				line += ", waits on " + strings.Join(st.Waiting, ", ")
			}
			stuck = append(stuck, line)
		}
		sort.Strings(stuck)
		if len(stuck) == 0 {
			return true, "", nil
		}
		return false, fmt.Sprintf("%d of %d not Ready, first %s", len(stuck), len(objs), stuck[0]), nil
	})
}

// WatchOrphans follows the Packages until ctx ends and returns the configuration failure the
// moment a Package is orphaned by a disabled one; it returns nil when ctx ends first. The
// component gates run beside it, so a gate waiting for what an orphan would have installed
// (CDI behind cozystack-basics, say) ends at once with the reason, not at the deadline.
func WatchOrphans(ctx context.Context, dyn dynamic.Interface, disabled []string) error {
	off := map[string]bool{}
	for _, d := range disabled {
		off[d] = true
	}
	err := Wait(ctx, dyn, Watch{GVR: gvrPackage}, "no Package orphaned", nil, func(objs []*unstructured.Unstructured) (bool, string, error) {
		if chains := orphans(objs, off); chains != nil {
			return false, "", orphanError(chains)
		}
		return false, "watching", nil
	})
	var ce *substrate.ConfigurationError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}
