package join

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// Options configure a Watcher.
type Options struct {
	// Management is the cluster the pools' Machines, VMs and disks live in.
	Management *cluster.Cluster
	// Tenant is the tenant cluster the workers join.
	Tenant *cluster.Cluster
	// Namespace is the tenant namespace on the management cluster.
	Namespace string
	// OSes are the OS families of the pools that will be followed; they decide which bootstrap
	// kinds are watched.
	OSes []osfamily.Family
	// Clock records each pool's stage timings; nil records nothing.
	Clock *budget.Clock
	// Log receives one progress line per change of a pool's stage or detail; nil: none.
	Log io.Writer
	// OnProgress, when set, hears each change of a pool's stage or detail (progress for a
	// person's console); it must not block.
	OnProgress func(Progress)
	// Consoles is the run's console hub for Namespace (the one the diagnostics read too, so
	// each VMI's console is held once); with one, the guests' boot (and, for an OS that prints
	// it, their join) is judged from their serial consoles; nil: from the objects alone.
	Consoles *serialconsole.Hub
	// Platform, when set, names the platform components unavailable now (the run's platform
	// watch, platformwatch.Watch.Outages): a pool whose wait runs out while one is fails with
	// class platform, naming them.
	Platform func(context.Context) []string
	// WorkloadImage is the pod image pinned to each Node, by digest (lane workload).
	WorkloadImage string
}

// Watcher holds informers on the management namespace and the tenant cluster, shared by the
// joins of every pool: each change of a watched object re-evaluates the pools, so a wait
// moves on (or ends on a terminal state) as soon as the API shows it, without polling.
type Watcher struct {
	o        Options
	mgmt     cache.Cache
	tenant   cache.Cache
	consoles *consoles
	// unsubscribe ends the consoles' subscription to the hub.
	unsubscribe func()
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup

	mu       sync.Mutex
	subs     map[int]chan struct{}
	nextSub  int
	progress map[string]Progress
	families map[string]osfamily.Family // the followed pools' OS families, by name
}

// Start builds the informers, waits until they hold a first full listing, and creates the
// tenant namespace of the workload pods. Close stops them.
func Start(ctx context.Context, o Options) (*Watcher, error) {
	if o.Management == nil || o.Tenant == nil || o.Namespace == "" {
		return nil, fmt.Errorf("join: Options need the management and tenant clusters and the tenant namespace")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	wctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{o: o, ctx: wctx, cancel: cancel, subs: map[int]chan struct{}{}, progress: map[string]Progress{},
		families: map[string]osfamily.Family{}}
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	var err error
	w.mgmt, err = cache.New(o.Management.REST, cache.Options{
		Scheme: cluster.Scheme(), Mapper: o.Management.Client.RESTMapper(),
		DefaultNamespaces:           map[string]cache.Config{o.Namespace: {}},
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		return nil, fmt.Errorf("join: management informers: %w", err)
	}
	w.tenant, err = cache.New(o.Tenant.REST, cache.Options{
		Scheme: cluster.Scheme(), Mapper: o.Tenant.Client.RESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:   {Namespaces: map[string]cache.Config{tenant.WorkloadNamespace: {}}},
			&corev1.Event{}: {Namespaces: map[string]cache.Config{tenant.WorkloadNamespace: {}}},
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{tenant.KubeletConfigNamespace: {}},
				Field: fields.OneTermEqualSelector("metadata.name", tenant.KubeletConfigName)},
			&corev1.Service{}: {Namespaces: map[string]cache.Config{tenant.CoreDNSNamespace: {}},
				Field: fields.OneTermEqualSelector("metadata.name", tenant.CoreDNSService)},
		},
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		return nil, fmt.Errorf("join: tenant informers: %w", err)
	}
	mgmtKinds := []client.Object{&clusterv1.Machine{}, &clusterv1.MachineSet{}, &clusterv1.MachineDeployment{}, &cdiv1.DataVolume{},
		&kubevirtv1.VirtualMachine{}, &kubevirtv1.VirtualMachineInstance{}, &corev1.Pod{}, &corev1.Node{},
		unstructuredOf(tenant.KubevirtMachineGVK)}
	seen := map[string]bool{}
	for _, os := range o.OSes {
		if seen[os.Name] {
			continue
		}
		seen[os.Name] = true
		w.families[os.Name] = os
		mgmtKinds = append(mgmtKinds, unstructuredOf(os.BootstrapTemplate), unstructuredOf(os.BootstrapConfig))
	}
	tenantKinds := []client.Object{&corev1.Node{}, &corev1.Pod{}, &corev1.Event{}, &corev1.ConfigMap{}, &corev1.Service{}, &certificatesv1.CertificateSigningRequest{}}
	if err := w.run(ctx, "management "+o.Management.Name, w.mgmt, mgmtKinds); err != nil {
		return nil, err
	}
	if err := w.run(ctx, "tenant "+o.Tenant.Name, w.tenant, tenantKinds); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant.WorkloadNamespace,
		Labels: map[string]string{tenant.LabelManagedBy: tenant.ManagedBy}}}
	if err := o.Tenant.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("join: creating namespace %s in the tenant cluster %s: %w", tenant.WorkloadNamespace, o.Tenant.Name, err)
	}
	if o.Consoles != nil {
		w.consoles = newConsoles(w.poke)
		w.unsubscribe = o.Consoles.Subscribe(w.consoles)
	}
	ok = true
	return w, nil
}

// run starts cache c, an informer per kind with the poke handler, and waits for their sync.
func (w *Watcher) run(ctx context.Context, where string, c cache.Cache, kinds []client.Object) error {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		_ = c.Start(w.ctx)
	}()
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.poke() },
		UpdateFunc: func(any, any) { w.poke() },
		DeleteFunc: func(any) { w.poke() },
	}
	for _, k := range kinds {
		inf, err := c.GetInformer(ctx, k, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("join: watching %s in %s: %w (is its CRD installed?)", kindOf(k), where, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("join: the informers on %s did not sync: %v", where, context.Cause(ctx))
	}
	return nil
}

// Close stops the informers and the console readers.
func (w *Watcher) Close() {
	w.cancel()
	if w.unsubscribe != nil {
		w.unsubscribe()
	}
	w.wg.Wait()
}

// Progress is the last reported position of pool, if it is or was followed.
func (w *Watcher) Progress(pool string) (Progress, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.progress[pool]
	return p, ok
}

func (w *Watcher) setProgress(p Progress) {
	w.mu.Lock()
	w.progress[p.Pool] = p
	w.mu.Unlock()
	if w.o.OnProgress != nil {
		w.o.OnProgress(p)
	}
}

// subscribe returns a channel that receives a token after any watched change.
func (w *Watcher) subscribe() (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.nextSub
	w.nextSub++
	ch := make(chan struct{}, 1)
	w.subs[id] = ch
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs, id)
	}
}

func (w *Watcher) poke() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func unstructuredOf(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

func kindOf(o client.Object) string {
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u.GroupVersionKind().String()
	}
	return fmt.Sprintf("%T", o)
}

// since formats a duration for progress lines.
func since(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
