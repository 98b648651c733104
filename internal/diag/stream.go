package diag

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// Cluster names as the artifacts spell them.
const (
	Management = "management"
	Tenant     = "tenant"
)

// managementKinds are the kinds whose conditions and phases the timeline follows in the tenant
// namespace of the management cluster, at the versions the harness reads them.
var managementKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Pod"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSet"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineHealthCheck"},
	tenant.KubevirtClusterGVK,
	tenant.KubevirtMachineGVK,
	{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"},
	{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachineInstance"},
	{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"},
	tenant.KamajiControlPlaneGVK,
	tenant.TenantControlPlaneGVK,
	tenant.HelmReleaseGVK,
	tenant.KubernetesGVK,
}

// tenantKinds are followed in every namespace of the tenant cluster.
var tenantKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Node"},
	{Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest"},
}

// EventLine is one line of an events.jsonl.
type EventLine struct {
	// At is when the event last happened, by its own clock; First when it first did.
	At    time.Time `json:"at"`
	First time.Time `json:"first,omitzero"`
	// Seen is when the harness received this version of the event.
	Seen      time.Time `json:"seen"`
	Cluster   string    `json:"cluster"`
	Namespace string    `json:"namespace,omitempty"`
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	Type      string    `json:"type"`
	Reason    string    `json:"reason"`
	Message   string    `json:"message"`
	Count     int32     `json:"count,omitempty"`
	Source    string    `json:"source,omitempty"`
}

// clusterStream follows one cluster: its events and the timeline of its kinds.
type clusterStream struct {
	rec       *Recorder
	name      string
	c         *cluster.Cluster
	namespace string

	events   *jsonl
	timeline *jsonl

	mu        sync.Mutex
	last      map[types.UID]objState
	notServed []string
}

func newClusterStream(rec *Recorder, name string, c *cluster.Cluster, namespace string) *clusterStream {
	dir := "clusters/" + name + "/"
	return &clusterStream{
		rec: rec, name: name, c: c, namespace: namespace,
		events:   &jsonl{a: rec.opts.Artifacts, rel: dir + "events.jsonl", limit: rec.opts.Limits.EventsBytes},
		timeline: &jsonl{a: rec.opts.Artifacts, rel: dir + "timeline.jsonl", limit: rec.opts.Limits.TimelineBytes},
		last:     map[types.UID]objState{},
	}
}

// start begins watching kinds and events; it returns once every served kind has listed.
func (s *clusterStream) start(ctx context.Context, kinds []schema.GroupVersionKind) error {
	dyn, err := dynamic.NewForConfig(s.c.REST)
	if err != nil {
		return err
	}
	groups, err := restmapper.GetAPIGroupResources(discovery.NewDiscoveryClient(s.c.Kube.Discovery().RESTClient()))
	if err != nil && len(groups) == 0 {
		return fmt.Errorf("cluster %s: API discovery: %w", s.c.Name, err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, s.namespace, nil)
	var synced []cache.InformerSynced
	for _, gvk := range kinds {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			s.notServed = append(s.notServed, fmt.Sprintf("%s %s is not served", gvk.Kind, gvk.GroupVersion()))
			continue
		}
		kind := gvk.Kind
		inf := df.ForResource(m.Resource).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.object(kind, obj, false) },
			UpdateFunc: func(_, obj any) { s.object(kind, obj, false) },
			DeleteFunc: func(obj any) { s.object(kind, obj, true) },
		}); err != nil {
			return err
		}
		synced = append(synced, inf.HasSynced)
	}
	kf := informers.NewSharedInformerFactoryWithOptions(s.c.Kube, 0, informers.WithNamespace(s.namespace))
	ev := kf.Core().V1().Events().Informer()
	if _, err := ev.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.event(obj) },
		UpdateFunc: func(_, obj any) { s.event(obj) },
	}); err != nil {
		return err
	}
	synced = append(synced, ev.HasSynced)
	df.Start(ctx.Done())
	kf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("cluster %s: the watches did not list before the stream was stopped: %w", s.c.Name, ctx.Err())
	}
	return nil
}

func (s *clusterStream) object(kind string, obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := s.rec.now()
	s.rec.opts.Artifacts.Redactor().Public(u.GetName(), u.GetNamespace())
	cur := stateOf(u)
	s.mu.Lock()
	prev, had := s.last[u.GetUID()]
	var p *objState
	if had {
		p = &prev
	}
	if deleted {
		delete(s.last, u.GetUID())
	} else {
		s.last[u.GetUID()] = cur
	}
	s.mu.Unlock()
	ch := Change{At: now, Cluster: s.name, Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID())}
	switch {
	case deleted:
		ch.Change = "deleted"
	case !had:
		ch.Change = "added"
	default:
		ch.Change = "changed"
	}
	phase, fields, conds, changed := diff(p, cur)
	if !changed && !deleted {
		return
	}
	ch.Phase, ch.Fields, ch.Conditions = phase, fields, conds
	s.rec.pools.learn(s.name, kind, u, deleted)
	if pn, ok := s.rec.pools.ofRef(s.name, kind, u.GetNamespace(), u.GetName(), u.GetUID()); ok {
		s.rec.poolFiles(pn).timeline.write(ch)
	} else {
		s.timeline.write(ch)
	}
}

func (s *clusterStream) event(obj any) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return
	}
	line := EventLine{
		At: join.EventTime(e), First: e.FirstTimestamp.Time, Seen: s.rec.now(), Cluster: s.name,
		Namespace: e.InvolvedObject.Namespace, Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name,
		Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count,
		Source: firstNonEmpty(e.ReportingController, e.Source.Component),
	}
	s.events.write(line)
	if pn, ok := s.rec.pools.ofRef(s.name, e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.InvolvedObject.UID); ok {
		s.rec.poolFiles(pn).events.write(line)
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// close ends the cluster's files and records them in the manifest.
func (s *clusterStream) close(started time.Time) {
	for _, f := range []struct {
		name string
		j    *jsonl
	}{{"stream events", s.events}, {"stream timeline", s.timeline}} {
		lines, n, status, err := f.j.close()
		e := Entry{Name: f.name, Scope: "cluster " + s.name, Process: s.rec.opts.Process, Status: status,
			Bound: Bound{Bytes: f.j.limit}, Start: started, Duration: secondsSince(s.rec.now(), started),
			Bytes: n, Items: lines}
		if lines > 0 {
			e.Paths = []string{f.j.rel}
		}
		if err != nil {
			e.Error = err.Error()
		}
		if f.name == "stream timeline" {
			s.mu.Lock()
			e.Notes = append(e.Notes, s.notServed...)
			s.mu.Unlock()
		}
		s.rec.opts.Manifest.Add(e)
	}
}
