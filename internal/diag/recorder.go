package diag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// Limits bound what the diagnostics write. Bytes are per file unless said otherwise.
type Limits struct {
	// ConsoleBytes bounds one console file.
	ConsoleBytes int64
	// EventsBytes and TimelineBytes bound one events.jsonl or timeline.jsonl.
	EventsBytes   int64
	TimelineBytes int64
	// LogBytes bounds one container log read by a collector; Logs is the most logs one
	// collector reads.
	LogBytes int64
	Logs     int
	// DumpBytes bounds one cluster's resource dump in all; DumpObjects its objects.
	DumpBytes   int64
	DumpObjects int
}

// DefaultLimits keep a failed sim run's artifacts well under 20 MB and a real run's under a
// size a CI artifact upload takes in seconds.
func DefaultLimits() Limits {
	return Limits{
		ConsoleBytes: 2 << 20, EventsBytes: 4 << 20, TimelineBytes: 4 << 20,
		LogBytes: 256 << 10, Logs: 24, DumpBytes: 8 << 20, DumpObjects: 5000,
	}
}

// Options configure a Recorder.
type Options struct {
	// Artifacts is the writer of the run's artifacts folder (E2E_ARTIFACTS).
	Artifacts *Artifacts
	// Manifest receives an entry per stream and collector.
	Manifest *Manifest
	// Process names who runs the recorder in the manifest ("harness", the suite's name).
	Process string
	// Management is the management cluster; Namespace the tenant namespace in it.
	Management *cluster.Cluster
	Namespace  string
	// Consoles is the run's console hub for Namespace, shared with the join so each VMI's
	// console is held once; nil: the recorder starts its own and closes it at Stop.
	Consoles *serialconsole.Hub
	// Limits bound the files; the zero value means DefaultLimits.
	Limits Limits
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Recorder streams the evidence of one tenant: events and the condition timeline of both
// clusters, and the serial console of every VMI of the pools it watches. Start it before the
// first pool is created; it keeps going until Stop.
type Recorder struct {
	opts    Options
	pools   pools
	started time.Time

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	files    map[string]*poolFiles
	clusters []*clusterStream
	tenants  []tenantCluster
	consoles *consoles
	// ownHub is the console hub the recorder started (Options.Consoles was nil); unsubscribe
	// ends its subscription to the hub.
	ownHub      *serialconsole.Hub
	unsubscribe func()
	stopped     bool

	once      onceCache     // on-failure collectors run once (per pool or cluster-wide)
	collectMu sync.Mutex    // one Collect at a time
	spent     time.Duration // of the diagnostics reserve, by Collect calls so far; under collectMu
}

// tenantCluster is one conformance cluster's tenant cluster: its artifacts name and its app.
type tenantCluster struct {
	name string
	app  tenant.Names
	c    *cluster.Cluster
}

type poolFiles struct {
	pn       tenant.PoolNames
	timeline *jsonl
	events   *jsonl
}

// Start begins streaming the management cluster's tenant namespace. It learns the Secret
// values of the management cluster first (and keeps learning those of the tenant namespace),
// so nothing it writes can carry one. It returns once every watch has listed.
func Start(ctx context.Context, opts Options) (*Recorder, error) {
	if opts.Artifacts == nil || opts.Manifest == nil || opts.Management == nil || opts.Namespace == "" {
		return nil, errors.New("diag.Start: Artifacts, Manifest, Management and Namespace are required")
	}
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Process == "" {
		opts.Process = "harness"
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Recorder{opts: opts, ctx: sctx, cancel: cancel, files: map[string]*poolFiles{}}
	r.started = r.now()
	red := opts.Artifacts.Redactor()
	red.Public(opts.Namespace)
	if _, err := LearnSecrets(ctx, opts.Management, red); err != nil {
		cancel()
		return nil, err
	}
	if err := WatchSecrets(sctx, opts.Management, red, opts.Namespace); err != nil {
		cancel()
		return nil, err
	}
	r.consoles = &consoles{rec: r, streams: map[string]*consoleFile{}}
	if opts.Consoles == nil {
		hub, err := serialconsole.Start(ctx, serialconsole.Options{Management: opts.Management, Namespace: opts.Namespace, Now: opts.Now})
		if err != nil {
			cancel()
			return nil, err
		}
		r.ownHub, r.opts.Consoles = hub, hub
	}
	r.unsubscribe = r.opts.Consoles.Subscribe(r.consoles)
	ms := newClusterStream(r, Management, opts.Management, opts.Namespace)
	if err := ms.start(sctx, append(slices.Clone(managementKinds), bootstrapConfigKinds()...)); err != nil {
		cancel()
		return nil, err
	}
	r.clusters = append(r.clusters, ms)
	return r, nil
}

func (r *Recorder) now() time.Time { return r.opts.Now() }

// WatchPool attributes the objects of pool p to its folder from now on: its timeline, events
// and consoles go to pools/<pool>/. Call it when the pool is created; objects that exist
// already are picked up by their next change, and the on-failure collectors read them anyway.
func (r *Recorder) WatchPool(p tenant.PoolNames) {
	r.opts.Artifacts.Redactor().Public(p.Namespace, p.Name, p.Release(), p.MachineDeployment(), p.BootstrapTemplate(),
		p.Kubeconfig().Name, p.AdminKubeconfig().Name)
	if r.pools.add(p) {
		r.poolFiles(p)
	}
}

func (r *Recorder) poolFiles(pn tenant.PoolNames) *poolFiles {
	r.mu.Lock()
	defer r.mu.Unlock()
	dir := poolDir(pn)
	if f, ok := r.files[dir]; ok {
		return f
	}
	f := &poolFiles{pn: pn,
		timeline: &jsonl{a: r.opts.Artifacts, rel: dir + "/timeline.jsonl", limit: r.opts.Limits.TimelineBytes},
		events:   &jsonl{a: r.opts.Artifacts, rel: dir + "/events.jsonl", limit: r.opts.Limits.EventsBytes},
	}
	r.files[dir] = f
	return f
}

// SetTenant starts streaming the tenant cluster of the Kubernetes app app (every namespace):
// its events, Nodes and CSRs, under clusters/<name>/ (Tenant for a run's only or first
// conformance cluster). It learns the tenant's Secret values first and keeps learning them.
// The on-failure collectors read each pool's Nodes from its own app's tenant cluster.
func (r *Recorder) SetTenant(ctx context.Context, name string, app tenant.Names, c *cluster.Cluster) error {
	r.mu.Lock()
	for _, t := range r.tenants {
		if t.name == name || t.app == app {
			r.mu.Unlock()
			return nil
		}
	}
	if r.stopped {
		r.mu.Unlock()
		return nil
	}
	r.tenants = append(r.tenants, tenantCluster{name: name, app: app, c: c})
	r.mu.Unlock()
	r.pools.setTenant(name, app)
	if err := WatchSecrets(r.ctx, c, r.opts.Artifacts.Redactor(), ""); err != nil {
		return err
	}
	ts := newClusterStream(r, name, c, "")
	if err := ts.start(r.ctx, tenantKinds); err != nil {
		return fmt.Errorf("diagnostics stream of the tenant cluster of %s: %w", app, err)
	}
	r.mu.Lock()
	r.clusters = append(r.clusters, ts)
	r.mu.Unlock()
	return nil
}

// ConsoleHub is the hub the recorder reads the consoles from: give it to the join
// (join.Options.Consoles) so each VMI's console is held once.
func (r *Recorder) ConsoleHub() *serialconsole.Hub { return r.opts.Consoles }

// tenantClusters are the tenant clusters given to SetTenant.
func (r *Recorder) tenantClusters() []tenantCluster {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.tenants)
}

// Consoles are the console files read so far (finished ones only until Stop).
func (r *Recorder) Consoles() []ConsoleRecord {
	recs := r.consoles.records()
	sort.Slice(recs, func(i, j int) bool { return recs[i].Path < recs[j].Path })
	return recs
}

// Stop ends every stream, closes the files, writes each pool's consoles.json and records every
// stream in the manifest. Calling it again does nothing.
func (r *Recorder) Stop() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	r.mu.Unlock()
	if r.ownHub != nil {
		r.ownHub.Close() // every stream ends, and says why
	}
	r.unsubscribe()
	r.consoles.stopAll(r.now(), "stopped at the end of the run")
	r.cancel()
	r.mu.Lock()
	streams := append([]*clusterStream(nil), r.clusters...)
	files := make([]*poolFiles, 0, len(r.files))
	for _, f := range r.files {
		files = append(files, f)
	}
	r.mu.Unlock()
	for _, s := range streams {
		s.close(r.started)
	}
	recs := r.Consoles()
	for _, f := range files {
		r.closePool(f, recs)
	}
}

func (r *Recorder) closePool(f *poolFiles, recs []ConsoleRecord) {
	scope := "pool " + f.pn.Pool
	for _, x := range []struct {
		name string
		j    *jsonl
	}{{"stream events", f.events}, {"stream timeline", f.timeline}} {
		lines, n, status, err := x.j.close()
		e := Entry{Name: x.name, Scope: scope, Process: r.opts.Process, Status: status, Bound: Bound{Bytes: x.j.limit},
			Start: r.started, Duration: secondsSince(r.now(), r.started), Bytes: n, Items: lines}
		if lines > 0 {
			e.Paths = []string{x.j.rel}
		}
		if err != nil {
			e.Error = err.Error()
		}
		r.opts.Manifest.Add(e)
	}
	var mine []ConsoleRecord
	e := Entry{Name: "stream consoles", Scope: scope, Process: r.opts.Process, Status: Complete,
		Bound: Bound{Bytes: r.opts.Limits.ConsoleBytes}, Start: r.started, Duration: secondsSince(r.now(), r.started)}
	var errs []string
	for _, c := range recs {
		if c.Pool != f.pn.Pool {
			continue
		}
		mine = append(mine, c)
		e.Items++
		e.Bytes += c.Bytes
		e.Paths = append(e.Paths, c.Path)
		if c.Truncated && e.Status == Complete {
			e.Status = Truncated
			e.Error = c.Path + ": " + c.EndReason
		}
		if c.Error != "" {
			errs = append(errs, c.Path+": "+c.Error)
		}
	}
	if len(errs) > 0 {
		e.Notes = append(e.Notes, errs...)
		if e.Items > 0 && len(errs) == e.Items && e.Bytes == 0 {
			e.Status, e.Error = Failed, errs[0]
		}
	}
	if len(mine) > 0 {
		rel := poolDir(f.pn) + "/consoles.json"
		if _, err := r.opts.Artifacts.WriteJSON(rel, mine, 0); err == nil {
			e.Paths = append(e.Paths, rel)
		}
	} else {
		e.Notes = append(e.Notes, "no launcher with a "+ConsoleContainer+" container started for this pool")
	}
	r.opts.Manifest.Add(e)
}

func secondsSince(now, t time.Time) budget.Seconds { return budget.Seconds(now.Sub(t)) }
