package tenant

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// WaitError is a tenant-level wait that did not end well: a terminal state (Class says which)
// or the phase budget running out (Class verdict.Deadline) while waiting for What.
type WaitError struct {
	// Phase is the lane phase the wait ran in ("tenant", "refusals", "teardown").
	Phase string
	// Pool is the pool the wait was about; empty when it is about none.
	Pool string
	// What is what was awaited ("tenant control plane kubernetes-pools-ab12").
	What    string
	Class   verdict.Class
	Detail  string
	Elapsed time.Duration
	Budget  time.Duration
	// At is when the wait ended.
	At time.Time
}

// Judgement is the wait's class at its phase, decided when it ended (verdict.Judge).
func (e *WaitError) Judgement() verdict.Judgement {
	return verdict.Judgement{Class: e.Class, Stage: e.Phase, At: e.At}
}

func (e *WaitError) Error() string {
	who := ""
	if e.Pool != "" {
		who = "pool " + e.Pool + ": "
	}
	switch {
	case e.Class == verdict.Deadline && e.Budget <= 0:
		return fmt.Sprintf("%s%s: waiting for %s: the phase's time had run out before the wait began", who, e.Phase, e.What)
	case e.Class == verdict.Deadline:
		return fmt.Sprintf("%s%s: waiting for %s: still not there after %s of %s: %s", who, e.Phase, e.What,
			e.Elapsed.Round(time.Second), e.Budget.Round(time.Second), e.Detail)
	}
	return fmt.Sprintf("%s%s: %s: %s: %s", who, e.Phase, e.What, e.Class, e.Detail)
}

// Ref names what a wait watches: one object, or with an empty Name every object of the kind
// in the namespace (with empty Namespace too, of a cluster-scoped kind, every one).
type Ref struct {
	GVK schema.GroupVersionKind
	// Namespace is empty for cluster-scoped kinds.
	Namespace, Name string
	// In is the cluster the object lives in; nil: the wait's own cluster. One wait can so
	// watch the management and the tenant cluster at once.
	In *cluster.Cluster
}

func (r Ref) String() string {
	where := r.Namespace + "/" + r.Name
	if r.Namespace == "" {
		where = r.Name
	}
	if r.Name == "" {
		return r.GVK.Kind + "s in " + r.Namespace
	}
	return r.GVK.Kind + " " + where
}

// Objects are the watched objects as last seen.
type Objects map[Ref][]*unstructured.Unstructured

// Get is the object ref names, nil while it does not exist.
func (o Objects) Get(ref Ref) *unstructured.Unstructured {
	if l := o[ref]; len(l) > 0 {
		return l[0]
	}
	return nil
}

// Judge looks at the watched objects and says whether the wait is over, where it stands in
// words, or that it can never be over (a *Terminal error).
type Judge func(objs Objects) (done bool, detail string, err error)

// Terminal ends a wait early: the awaited state can no longer come.
type Terminal struct {
	Class  verdict.Class
	Detail string
}

func (t *Terminal) Error() string { return string(t.Class) + ": " + t.Detail }

// WaitOptions describe one watch-driven wait.
type WaitOptions struct {
	// Phase names the lane phase in the wait's error; empty: the phase ctx belongs to
	// (budget.PhaseName).
	Phase string
	// Pool is the pool the wait is about, named in its error; empty when it is about none.
	Pool  string
	What  string
	Watch []Ref
	Judge Judge
	// Log receives one line each time the detail changes; nil: no progress lines.
	Log io.Writer
	// OnDetail, when set, hears each change of the detail (a person's console); it must not
	// block.
	OnDetail func(detail string)
}

// Wait watches the objects until Judge says done, Judge returns a *Terminal, or ctx ends (a
// *WaitError of class deadline with the last detail). Every object is read through an
// informer, so every change is judged at once and nothing polls.
func Wait(ctx context.Context, c *cluster.Cluster, o WaitOptions) error {
	if o.Phase == "" {
		o.Phase = phaseOf(ctx)
	}
	start := time.Now()
	budget := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		budget = dl.Sub(start)
	}
	if ctx.Err() != nil {
		// Nothing was read: say so, rather than "0s of 0s: not read yet".
		return &WaitError{Phase: o.Phase, Pool: o.Pool, What: o.What, Class: verdict.Deadline, At: start,
			Detail: fmt.Sprintf("the phase's context had ended before the wait began (%v)", context.Cause(ctx))}
	}
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	poke := make(chan struct{}, 1)
	informers, err := startInformers(ictx, c, o, poke)
	if err != nil {
		return err
	}
	syncCh := cachesSynced(ictx, informers)
	synced := false
	detail := "not read yet (the watches have not synced)"
	for {
		select {
		case <-ctx.Done():
			return &WaitError{Phase: o.Phase, Pool: o.Pool, What: o.What, Class: verdict.Deadline, Detail: detail,
				Elapsed: time.Since(start), Budget: budget, At: time.Now()}
		case <-poke:
		case <-syncCh:
			synced, syncCh = ctx.Err() == nil, nil
		}
		if !synced {
			continue
		}
		done, d, err := o.Judge(snapshot(informers))
		if d != detail {
			o.tellDetail(d, start, budget)
		}
		detail = d
		var t *Terminal
		switch {
		case errors.As(err, &t):
			return &WaitError{Phase: o.Phase, Pool: o.Pool, What: o.What, Class: t.Class, Detail: t.Detail,
				Elapsed: time.Since(start), Budget: budget, At: time.Now()}
		case err != nil:
			return fmt.Errorf("%s: waiting for %s: %w", o.Phase, o.What, err)
		case done:
			return nil
		}
	}
}

// startInformers starts one informer, running until ictx ends, on each object o watches, in the
// cluster its Ref names (c when none); each change of one sends to poke, without blocking.
func startInformers(ictx context.Context, c *cluster.Cluster, o WaitOptions, poke chan<- struct{}) (map[Ref]cache.SharedIndexInformer, error) {
	dyns := map[*cluster.Cluster]dynamic.Interface{}
	notify := func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	informers := map[Ref]cache.SharedIndexInformer{}
	for _, ref := range o.Watch {
		in := c
		if ref.In != nil {
			in = ref.In
		}
		dyn, ok := dyns[in]
		if !ok {
			var err error
			if dyn, err = dynamic.NewForConfig(in.REST); err != nil {
				return nil, err
			}
			dyns[in] = dyn
		}
		inf, err := objectInformer(in, dyn, ref)
		if err != nil {
			return nil, fmt.Errorf("%s: waiting for %s: %w", o.Phase, o.What, err)
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { notify() }, UpdateFunc: func(any, any) { notify() }, DeleteFunc: func(any) { notify() },
		}); err != nil {
			return nil, err
		}
		informers[ref] = inf
		go inf.RunWithContext(ictx)
	}
	return informers, nil
}

// cachesSynced is closed once every informer has synced, or once ictx has ended.
func cachesSynced(ictx context.Context, informers map[Ref]cache.SharedIndexInformer) <-chan struct{} {
	syncCh := make(chan struct{})
	go func() {
		for _, inf := range informers {
			cache.WaitForCacheSync(ictx.Done(), inf.HasSynced)
		}
		close(syncCh)
	}()
	return syncCh
}

// snapshot is what each informer's store holds now: the watched objects, for the Judge.
func snapshot(informers map[Ref]cache.SharedIndexInformer) Objects {
	objs := Objects{}
	for ref, inf := range informers {
		objs[ref] = nil
		for _, item := range inf.GetStore().List() {
			objs[ref] = append(objs[ref], item.(*unstructured.Unstructured))
		}
	}
	return objs
}

// tellDetail passes a changed detail d on: a progress line to o.Log (the time since start, of
// budget), then to o.OnDetail; each only when set.
func (o WaitOptions) tellDetail(d string, start time.Time, budget time.Duration) {
	if o.Log != nil {
		ceiling := "no deadline"
		if budget > 0 {
			ceiling = budget.Round(time.Second).String()
		}
		fmt.Fprintf(o.Log, "%s %s: %s: %s (%s of %s)\n", time.Now().UTC().Format("15:04:05.000"), o.Phase, o.What, d,
			time.Since(start).Round(100*time.Millisecond), ceiling)
	}
	if o.OnDetail != nil {
		o.OnDetail(d)
	}
}

// objectInformer is an informer on what ref names (one object: a name field selector).
func objectInformer(c *cluster.Cluster, dyn dynamic.Interface, ref Ref) (cache.SharedIndexInformer, error) {
	mapping, err := c.Client.RESTMapper().RESTMapping(ref.GVK.GroupKind(), ref.GVK.Version)
	if err != nil {
		return nil, fmt.Errorf("%s is not served by cluster %s: %w", ref.GVK, c.Name, err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if ref.Namespace != "" {
		ri = dyn.Resource(mapping.Resource).Namespace(ref.Namespace)
	}
	sel := ""
	if ref.Name != "" {
		sel = fields.OneTermEqualSelector("metadata.name", ref.Name).String()
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			lo.FieldSelector = sel
			return ri.List(ctx, lo)
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			lo.FieldSelector = sel
			return ri.Watch(ctx, lo)
		},
	}
	return cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{}), nil
}

// phaseOf is the lane phase ctx belongs to, for errors; "no phase" outside any.
func phaseOf(ctx context.Context) string {
	if name := budget.PhaseName(ctx); name != "" {
		return name
	}
	return "no phase"
}
