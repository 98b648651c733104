package diag

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// CollectOptions say what failed and how much time the collectors have.
type CollectOptions struct {
	Budget
	// Pools are the failing pools; none (a failure about no pool) runs the cluster-wide
	// collectors only.
	Pools []tenant.PoolNames
	// Class and Stage of the failure decide which files are named first as its evidence.
	Class verdict.Class
	Stage join.Stage
}

// Result is what the on-failure collectors did.
type Result struct {
	Entries []Entry
	// Evidence are the files that explain the failure, most telling first, relative to the
	// artifacts folder: put them into verdict.Failure.Evidence.
	Evidence []string
	Duration time.Duration
}

// Collect runs the on-failure collectors for the failing pools, cheapest and most
// discriminating first, inside the diagnostics reserve (one reserve for all the recorder's
// Collect calls: each spends from what the ones before left): the pools' events, DataVolumes and
// importer logs, Machines and MHC, the tenant's CSRs and kubelet configuration, Node names
// against VMI names, consoles the stream could not follow, previous logs of every restarted
// container, and resource dumps of both clusters. Each collector runs once per pool (or once,
// cluster-wide ones) however many failures ask; a later failure gets the files of the first.
// Every collector ends up in the manifest once.
func (r *Recorder) Collect(ctx context.Context, o CollectOptions) Result {
	// One collection at a time, so the reserve they share is counted exactly.
	r.collectMu.Lock()
	defer r.collectMu.Unlock()
	start := r.now()
	pns := o.Pools
	for _, pn := range pns {
		r.WatchPool(pn)
	}
	sc, errEntry := r.scene(ctx)
	if errEntry != nil {
		r.opts.Manifest.Add(*errEntry)
		return Result{Entries: []Entry{*errEntry}, Duration: r.now().Sub(start)}
	}
	// Per-pool collectors share their part of the reserve between the failing pools, and run
	// once per pool however many of its specs fail.
	scale := 1 / float64(max(len(pns), 1))
	var cs []collector
	perPool := func(f func(tenant.PoolNames) collector) {
		for _, pn := range pns {
			c := f(pn)
			c.share *= scale
			c.key = c.name + " " + poolDir(pn)
			cs = append(cs, c)
		}
	}
	perPool(sc.poolEvents)
	perPool(sc.diskImport)
	perPool(sc.machines)
	// What a joining worker meets is read in the failing pools' own tenant clusters only.
	mine := sc.clustersOf(pns)
	if len(mine) == 0 {
		cs = append(cs, sc.tenantJoin(nil))
	}
	for _, t := range sc.tenants {
		if mine[t.name] {
			cs = append(cs, sc.tenantJoin(t))
		}
	}
	perPool(sc.identity)
	perPool(sc.consoles)
	if o.Class == verdict.Platform {
		cs = append(cs, sc.platformCollectors()...)
	}
	cs = append(cs, sc.previousLogs(), sc.resources(sc.mgmt, r.opts.Namespace))
	for _, t := range sc.tenants {
		cs = append(cs, sc.resources(t, ""))
	}
	o.Budget.used = r.spent
	entries := runCollectors(ctx, r.opts.Artifacts, r.opts.Manifest, r.opts.Process, r.opts.Limits, r.now, o.Budget, cs, &r.once)
	took := r.now().Sub(start)
	r.spent += took
	return Result{Entries: entries, Evidence: r.evidence(pns, entries, o.Class, o.Stage, sc.othersThan(mine)), Duration: took}
}

// clustersOf are the names of the tenant clusters pools pns are node groups of (every tenant
// cluster when pns is empty: a failure of no pool).
func (sc *scene) clustersOf(pns []tenant.PoolNames) map[string]bool {
	mine := map[string]bool{}
	if len(pns) == 0 {
		for _, t := range sc.tenants {
			mine[t.name] = true
		}
	}
	for _, pn := range pns {
		if t, ok := sc.apps[pn.Names]; ok {
			mine[t.name] = true
		}
	}
	return mine
}

// othersThan are the scopes of the tenant clusters not in mine: their files tell nothing of
// the failing pools.
func (sc *scene) othersThan(mine map[string]bool) map[string]bool {
	others := map[string]bool{}
	for _, t := range sc.tenants {
		if !mine[t.name] {
			others["cluster "+t.name] = true
		}
	}
	return others
}

// scene builds the readers of both clusters; a management cluster that cannot be read is
// a failed entry.
func (r *Recorder) scene(ctx context.Context) (*scene, *Entry) {
	mgmt, err := newReader(Management, r.opts.Management)
	if err != nil {
		return nil, &Entry{Name: "collectors", Scope: "cluster " + Management, Process: r.opts.Process, Status: Failed,
			Start: r.now(), Error: err.Error()}
	}
	sc := &scene{namespace: r.opts.Namespace, mgmt: mgmt, pools: &r.pools, streamed: r.consoles.all, now: r.now}
	sc.apps = map[tenant.Names]*reader{}
	for _, t := range r.tenantClusters() {
		if tr, err := newReader(t.name, t.c); err == nil {
			sc.tenants = append(sc.tenants, tr)
			sc.apps[t.app] = tr
		}
	}
	return sc, nil
}

// telling lists, per class, the collectors whose files explain it best, in that order.
var telling = map[verdict.Class][]string{
	verdict.DiskImport:      {"disk-import", "events", "machines"},
	verdict.VMUnschedulable: {"events", "machines"},
	verdict.VMFailed:        {"events", "machines", "consoles"},
	verdict.BootStall:       {"consoles", "machines", "events"},
	verdict.Bootstrap:       {"machines", "events"},
	verdict.JoinRejected:    {"consoles", "tenant-join", "events"},
	verdict.Identity:        {"identity", "machines", "consoles"},
	verdict.MachineFailed:   {"machines", "events"},
	verdict.NodeNotReady:    {"identity", "events"},
	verdict.NotSchedulable:  {"identity", "events"},
	verdict.ClusterDNS:      {"tenant-join", "consoles"},
	// The lifecycle specs: a MachineHealthCheck's marks and remediations show on the Machines
	// and in the events; what a deletion left, in the events and the resource dumps.
	verdict.Remediation: {"machines", "events"},
	verdict.Leak:        {"events", "machines", "resources"},
	// A platform component was down: its Pods (their last exit and logs) and the platform's
	// Events (the kubelet's BackOff and restarts) first.
	verdict.Platform: {"platform-pods", "platform-events", "events"},
}

// tellingAt lists them per stage, for a deadline (the stage says where it was stuck).
var tellingAt = map[join.Stage][]string{
	join.StageBootstrapTemplate: {"machines", "events"},
	join.StageBootstrapData:     {"machines", "events"},
	join.StageDiskImport:        {"disk-import", "events"},
	join.StageVMIRunning:        {"events", "machines"},
	join.StageGuestBoot:         {"consoles", "machines"},
	join.StageJoin:              {"consoles", "tenant-join", "events"},
	join.StageNodeRegistered:    {"identity", "consoles", "tenant-join"},
	join.StageProviderID:        {"identity", "machines"},
	join.StageNodeRef:           {"identity", "machines", "events"},
	join.StageReady:             {"identity", "events"},
	join.StageSchedulable:       {"identity", "events"},
	join.StageWorkloadPod:       {"identity", "events"},
}

// evidence orders the files: the collectors that tell most about the class (or the stage of a
// deadline) first, then the pools' consoles and timelines, then everything else collected.
// Entries scoped to another tenant cluster (others, by scope) are no evidence of these pools.
func (r *Recorder) evidence(pns []tenant.PoolNames, entries []Entry, class verdict.Class, stage join.Stage, others map[string]bool) []string {
	entries = slices.DeleteFunc(slices.Clone(entries), func(e Entry) bool { return others[e.Scope] })
	names := telling[class]
	if len(names) == 0 {
		names = tellingAt[stage]
	}
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if p == "" || seen[p] {
			return
		}
		if _, err := os.Stat(r.opts.Artifacts.Path(p)); err != nil {
			return
		}
		seen[p] = true
		out = append(out, p)
	}
	for _, n := range names {
		for _, e := range entries {
			if e.Name == n {
				for _, p := range e.Paths {
					add(p)
				}
			}
			if n == "consoles" && e.Name == "consoles" {
				for _, pn := range pns {
					for _, p := range r.consoles.paths(pn.Pool) {
						add(p)
					}
				}
			}
		}
	}
	for _, pn := range pns {
		for _, p := range r.consoles.paths(pn.Pool) {
			add(p)
		}
		add(poolDir(pn) + "/timeline.jsonl")
		add(poolDir(pn) + "/events.jsonl")
	}
	for _, e := range entries {
		for _, p := range e.Paths {
			add(evidencePath(e, p))
		}
	}
	return out
}

// evidencePath names a resource dump by its folder, so a failure's evidence lists a handful of
// places and not every kind dumped.
func evidencePath(e Entry, p string) string {
	if e.Name != "resources" {
		return p
	}
	if i := strings.Index(p, "/resources/"); i >= 0 {
		return p[:i+len("/resources")]
	}
	return p
}
