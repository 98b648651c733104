package platformwatch

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// Options configure a Watch.
type Options struct {
	// Kube is the management cluster's client.
	Kube kubernetes.Interface
	// Components are what is watched; Components() when empty.
	Components []Component
	// Log hears each restart, outage and recovery as it is seen; nil: none.
	Log io.Writer
	// OnEvent, when set, is called with each of them too (the suite keeps them in the run's
	// timings, so the reports show them); it must not block.
	OnEvent func(Event)
}

// Event is one thing the watch saw happen to a component.
type Event struct {
	At        time.Time
	Component string
	// Kind is "restarted", "unavailable" or "available again".
	Kind   string
	Detail string
}

func (e Event) String() string {
	return fmt.Sprintf("%s platform: %s %s: %s", e.At.UTC().Format("15:04:05.000"), e.Component, e.Kind, e.Detail)
}

// Watch follows the platform's Deployments and Pods through informers, one set per namespace.
type Watch struct {
	o    Options
	stop chan struct{}
	once sync.Once
	// started is set once Start listed every namespace; before, the indexers are not read.
	started atomic.Bool
	pods    map[string]toolscache.Indexer // by namespace
	deploy  map[string]toolscache.Indexer

	mu        sync.Mutex
	restarts  map[string]int32 // Pod UID/container: restarts seen
	restarted map[string]int32 // component: restarts since the watch began
	order     []string         // components in the order they first restarted
	down      map[string]bool  // component: unavailable at the last look
	events    []Event
}

// Start is New, then Watch.Start.
func Start(ctx context.Context, o Options) (*Watch, error) {
	w := New(o)
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// New is a watch not started yet: a value to hand over (its Outages) before the platform is
// watched; until Start returns nil it names no outage and its Summary is empty.
func New(o Options) *Watch {
	if len(o.Components) == 0 {
		o.Components = Components()
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return &Watch{o: o, stop: make(chan struct{}), pods: map[string]toolscache.Indexer{}, deploy: map[string]toolscache.Indexer{},
		restarts: map[string]int32{}, restarted: map[string]int32{}, down: map[string]bool{}}
}

// Start builds the informers and waits until they listed once (or ctx ends). Once only.
func (w *Watch) Start(ctx context.Context) error {
	if w.o.Kube == nil {
		return fmt.Errorf("platformwatch: Options.Kube (the management cluster's client) is required")
	}
	var synced []toolscache.InformerSynced
	var factories []informers.SharedInformerFactory
	for _, ns := range w.namespaces() {
		f := informers.NewSharedInformerFactoryWithOptions(w.o.Kube, 0, informers.WithNamespace(ns))
		pi, di := f.Core().V1().Pods().Informer(), f.Apps().V1().Deployments().Informer()
		h := toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { w.look() }, UpdateFunc: func(_, _ any) { w.look() }, DeleteFunc: func(any) { w.look() },
		}
		if _, err := pi.AddEventHandler(h); err != nil {
			return err
		}
		if _, err := di.AddEventHandler(h); err != nil {
			return err
		}
		w.pods[ns], w.deploy[ns] = pi.GetIndexer(), di.GetIndexer()
		synced = append(synced, pi.HasSynced, di.HasSynced)
		factories = append(factories, f)
	}
	// Every namespace's indexers are in place before any informer starts: a handler's look reads
	// them all, and one started early would read the maps while this loop still wrote them.
	for _, f := range factories {
		f.Start(w.stop)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !toolscache.WaitForCacheSync(cctx.Done(), synced...) {
		w.Stop()
		return fmt.Errorf("platformwatch: the Pods and Deployments of %s were not listed before %v", strings.Join(w.namespaces(), ", "), ctx.Err())
	}
	w.look()
	w.started.Store(true)
	return nil
}

// Stop ends the informers. Idempotent.
func (w *Watch) Stop() { w.once.Do(func() { close(w.stop) }) }

func (w *Watch) namespaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range w.o.Components {
		if !seen[c.Namespace] {
			seen[c.Namespace] = true
			out = append(out, c.Namespace)
		}
	}
	sort.Strings(out)
	return out
}

// look compares every component with the last look: new restarts, outages and recoveries
// become events, each written to the log at once.
func (w *Watch) look() {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.o.Components {
		st := w.state(c)
		if !st.present {
			continue
		}
		for _, r := range st.restarts {
			if prev, ok := w.restarts[r.key]; !ok || r.count > prev {
				if ok {
					if w.restarted[c.Name] == 0 {
						w.order = append(w.order, c.Name)
					}
					w.restarted[c.Name] += r.count - prev
					w.emit(Event{At: now, Component: c.Name, Kind: "restarted", Detail: r.detail})
				}
				w.restarts[r.key] = r.count
			}
		}
		switch {
		case !st.available && !w.down[c.Name]:
			w.down[c.Name] = true
			w.emit(Event{At: now, Component: c.Name, Kind: "unavailable", Detail: st.outage().String()})
		case st.available && w.down[c.Name]:
			delete(w.down, c.Name)
			w.emit(Event{At: now, Component: c.Name, Kind: "available again", Detail: st.readyPods})
		}
	}
}

func (w *Watch) emit(e Event) {
	w.events = append(w.events, e)
	fmt.Fprintln(w.o.Log, e.String())
	if w.o.OnEvent != nil {
		w.o.OnEvent(e)
	}
}

// Outages are the components unavailable now, for a pool whose wait ran out at: each names
// the component, since when, why, and its last exit with its last log line.
func (w *Watch) Outages(ctx context.Context) []string {
	if !w.started.Load() {
		return nil
	}
	var out []string
	for _, c := range w.o.Components {
		st := w.state(c)
		if !st.present || st.available {
			continue
		}
		o := st.outage()
		if o.lastLine == "" && o.pod != nil {
			o.lastLine = w.previousLogLine(ctx, o.pod, o.container)
		}
		out = append(out, o.String())
	}
	return out
}

// Summary says what the platform did during the watch: each component that restarted, and
// whether it is available now; "" when nothing restarted and nothing is down.
func (w *Watch) Summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for _, n := range w.order {
		now := "available again"
		if w.down[n] {
			now = "still unavailable"
		}
		parts = append(parts, fmt.Sprintf("%s restarted %d time(s), %s", n, w.restarted[n], now))
	}
	return strings.Join(parts, "; ")
}

// pods are the Pods of c, deployment the Deployment (nil when absent).
func (w *Watch) objects(c Component) ([]*corev1.Pod, *appsv1.Deployment) {
	var pods []*corev1.Pod
	sel := labels.SelectorFromSet(c.Selector)
	for _, o := range w.pods[c.Namespace].List() {
		if p, ok := o.(*corev1.Pod); ok && p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels)) {
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var d *appsv1.Deployment
	if c.Deployment != "" {
		if o, ok, _ := w.deploy[c.Namespace].GetByKey(c.Namespace + "/" + c.Deployment); ok {
			d, _ = o.(*appsv1.Deployment)
		}
	}
	return pods, d
}

// previousLogLine is the last line the container's previous instance logged (a platform
// container's termination message is empty under the default policy File).
func (w *Watch) previousLogLine(ctx context.Context, p *corev1.Pod, container string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tail := int64(1)
	data, err := w.o.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Previous: true, TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return lastLine(string(data))
}
