package suiterun

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/testbed"
)

// checkTimeouts are the timeouts a pool's MachineHealthCheck runs with, as the installed
// platform rendered it; -1 where the check has no such condition.
type checkTimeouts struct {
	NodeStartup, ReadyUnknown, ReadyFalse time.Duration
}

func (c checkTimeouts) String() string {
	say := func(d time.Duration) string {
		if d < 0 {
			return "none"
		}
		return d.String()
	}
	return fmt.Sprintf("nodeStartupTimeout %s, Ready=Unknown %s, Ready=False %s", say(c.NodeStartup), say(c.ReadyUnknown), say(c.ReadyFalse))
}

// of is the timeout a named lane timeout stands for; false for one the check does not hold.
func (c checkTimeouts) of(name string) (time.Duration, bool) {
	switch name {
	case NodeStartupTimeout:
		return c.NodeStartup, true
	case ReadyUnknownTimeout:
		return c.ReadyUnknown, true
	}
	return 0, false
}

func timeoutsOf(mhc *clusterv1.MachineHealthCheck) checkTimeouts {
	secs := func(s *int32) time.Duration { return time.Duration(ptr.Deref(s, 0)) * time.Second }
	c := checkTimeouts{NodeStartup: secs(mhc.Spec.Checks.NodeStartupTimeoutSeconds), ReadyUnknown: -1, ReadyFalse: -1}
	for _, u := range mhc.Spec.Checks.UnhealthyNodeConditions {
		if u.Type != "Ready" {
			continue
		}
		switch u.Status {
		case "Unknown":
			c.ReadyUnknown = secs(u.TimeoutSeconds)
		case "False":
			c.ReadyFalse = secs(u.TimeoutSeconds)
		}
	}
	return c
}

// healthCheckTimeouts reads pool p's MachineHealthCheck.
func (r *Step) healthCheckTimeouts(p join.Pool) checkTimeouts {
	mhc := &clusterv1.MachineHealthCheck{}
	r.Must(r.lc.Tenant.Options().Management.Client.Get(r.Ctx, types.NamespacedName{Namespace: p.Names.Namespace, Name: p.Names.MachineHealthCheck()}, mhc))
	return timeoutsOf(mhc)
}

// holdTimeouts makes pool p's MachineHealthCheck run with the product timeouts the lane
// declares for the spec's phase (timers), whatever the installed platform's defaults, so the
// phase's ceiling, which lanes-check holds to those, holds what the spec waits on. Each is set
// only where the rendered check differs, where the chart reads it: nodeStartupTimeout per pool
// (nodeGroups.<pool>.nodeStartupTimeout, cozystack v1.6.1 and main templates/cluster.yaml, main
// l.943-945), the Ready=Unknown timeout for the app (nodeHealthCheck.readyUnknownTimeout, main
// values.yaml:309 and templates/cluster.yaml:953; v1.6.1 and v1.6.2 render 30s, fixed,
// l.844-847). group holds the caller's own changes to the pool, written with them. The
// installed platform's own values are reported first; a check that does not run the lane's
// values once rendered is a configuration failure naming both.
func (r *Step) holdTimeouts(p join.Pool, timers map[string]time.Duration, group map[string]any) {
	installed := r.healthCheckTimeouts(p)
	AddReportEntry("installed MachineHealthCheck", fmt.Sprintf("%s as the installed platform renders it: %s", p.Names.MachineHealthCheck(), installed))
	if group == nil {
		group = map[string]any{}
	}
	app, set := timeoutChanges(p.Name(), installed, timers, group)
	if len(group) > 0 || len(app) > 0 {
		r.render(p, group, app)
	}
	if len(set) > 0 {
		AddReportEntry("MachineHealthCheck timeouts set", strings.Join(set, "; "))
		r.Logf("pool %s: MachineHealthCheck %s set to the lane's timeouts: %s", p.Name(), p.Names.MachineHealthCheck(), strings.Join(set, "; "))
	}
	if err := unheld(r.phase, p.Names.MachineHealthCheck(), installed, r.healthCheckTimeouts(p), timers); err != nil {
		r.Must(&testbed.ConfigurationError{File: r.lc.Tenant.Options().Lane.File, Err: err})
	}
}

// timeoutChanges are the writes that make a MachineHealthCheck rendered with installed run the
// lane's timers: into group (nodeGroups.<pool>) and the returned app changes
// (nodeHealthCheck), and what was set, in words. A timeout already as the lane says is not
// written.
func timeoutChanges(pool string, installed checkTimeouts, timers map[string]time.Duration, group map[string]any) (map[string]any, []string) {
	app := map[string]any{}
	var set []string
	for _, name := range sortedNames(timers) {
		want := timers[name]
		got, held := installed.of(name)
		if !held || got == want {
			continue
		}
		switch name {
		case NodeStartupTimeout:
			group["nodeStartupTimeout"] = want.String()
			set = append(set, fmt.Sprintf("nodeGroups.%s.nodeStartupTimeout=%s (was %s)", pool, want, got))
		case ReadyUnknownTimeout:
			app["readyUnknownTimeout"] = want.String()
			set = append(set, fmt.Sprintf("nodeHealthCheck.readyUnknownTimeout=%s (Ready=Unknown was %s)", want, got))
		}
	}
	return app, set
}

// unheld says which of the lane's timers the rendered check still does not run, nil when it
// runs them all.
func unheld(phase, mhc string, installed, now checkTimeouts, timers map[string]time.Duration) error {
	var off []string
	for _, name := range sortedNames(timers) {
		if got, held := now.of(name); held && got != timers[name] {
			off = append(off, fmt.Sprintf("%s %s, but it runs %s", name, timers[name], got))
		}
	}
	if len(off) == 0 {
		return nil
	}
	return fmt.Errorf("budget phase %s declares %s, once the platform rendered the spec's setting: MachineHealthCheck %s (installed: %s) does not take it (cozystack v1.6.1 and v1.6.2 render Ready=Unknown 30s, fixed); declare the value it runs with and a ceiling that holds it",
		phase, strings.Join(off, "; "), mhc, installed)
}

// render writes group to nodeGroups.<pool> and app to the app's nodeHealthCheck and waits
// until the platform rendered both.
func (r *Step) render(p join.Pool, group, app map[string]any) {
	plat := r.lc.Tenant.Platform
	names := p.Names.Names
	if len(app) > 0 {
		obj, err := plat.Get(r.Ctx, names)
		r.Must(err)
		data, err := json.Marshal(map[string]any{"spec": map[string]any{"nodeHealthCheck": app}})
		r.Must(err)
		r.Must(plat.Mgmt.Client.Patch(r.Ctx, obj, client.RawPatch(types.MergePatchType, data)))
	}
	if len(group) > 0 {
		_, err := plat.UpdatePool(r.Ctx, names, p.Name(), func(g map[string]any) {
			for k, v := range group {
				g[k] = v
			}
		})
		r.Must(err)
	}
	gen, err := plat.ReleaseGeneration(r.Ctx, names)
	r.Must(err)
	rd, err := plat.WaitRendered(r.Ctx, names, gen)
	r.Must(err)
	Expect(rd.Ready).To(BeTrue(), "the platform refused nodeGroups.%s %v, nodeHealthCheck %v: %s", p.Name(), group, app, rd.HelmRelease)
}

func sortedNames(m map[string]time.Duration) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
