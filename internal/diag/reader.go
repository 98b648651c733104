package diag

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// reader lists any kind of one cluster as unstructured objects, through the cluster's clients
// (so transient API errors are retried inside them).
type reader struct {
	name   string
	c      *cluster.Cluster
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

// ErrNotServed says the cluster does not serve a kind (its CRD is not installed).
var ErrNotServed = errors.New("kind not served")

func newReader(name string, c *cluster.Cluster) (*reader, error) {
	cfg := rest.CopyConfig(c.REST)
	cfg.WarningHandler = rest.NoWarnings{} // deprecation notices of dumped kinds are not evidence
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(discovery.NewDiscoveryClient(c.Kube.Discovery().RESTClient()))
	if err != nil && len(groups) == 0 {
		return nil, fmt.Errorf("cluster %s: API discovery: %w", c.Name, err)
	}
	return &reader{name: name, c: c, dyn: dyn, mapper: restmapper.NewDiscoveryRESTMapper(groups)}, nil
}

// list returns every object of gvk in namespace ("" for all or cluster-scoped), paged.
func (r *reader) list(ctx context.Context, gvk schema.GroupVersionKind, namespace string) ([]unstructured.Unstructured, error) {
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, gvk.GroupVersion(), ErrNotServed)
	}
	var ri dynamic.ResourceInterface = r.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace && namespace != "" {
		ri = r.dyn.Resource(m.Resource).Namespace(namespace)
	}
	var out []unstructured.Unstructured
	cont := ""
	for {
		l, err := ri.List(ctx, metav1.ListOptions{Limit: listPage, Continue: cont})
		if err != nil {
			return out, fmt.Errorf("listing %s in cluster %s: %w", gvk.Kind, r.name, err)
		}
		out = append(out, l.Items...)
		if cont = l.GetContinue(); cont == "" {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GetNamespace() != out[j].GetNamespace() {
			return out[i].GetNamespace() < out[j].GetNamespace()
		}
		return out[i].GetName() < out[j].GetName()
	})
	return out, nil
}

// listed is one kind's list.
type listed struct {
	gvk   schema.GroupVersionKind
	items []unstructured.Unstructured
	err   error
}

// listParallel is how many lists a collector keeps in flight: enough to hide an apiserver's
// latency, few enough not to load it.
const listParallel = 4

// listMany lists every kind of gvks in namespace, a few at a time, in gvks' order.
func (r *reader) listMany(ctx context.Context, gvks []schema.GroupVersionKind, namespace string) []listed {
	out := make([]listed, len(gvks))
	sem := make(chan struct{}, listParallel)
	var wg sync.WaitGroup
	for i, gvk := range gvks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i] = listed{gvk: gvk, err: ctx.Err()}
				return
			}
			defer func() { <-sem }()
			items, err := r.list(ctx, gvk, namespace)
			out[i] = listed{gvk: gvk, items: items, err: err}
		}()
	}
	wg.Wait()
	return out
}

// pods lists core Pods in namespace ("" for all).
func (r *reader) pods(ctx context.Context, namespace string) ([]corev1.Pod, error) {
	var out []corev1.Pod
	cont := ""
	for {
		l, err := r.c.Kube.CoreV1().Pods(namespace).List(ctx, listOptions(cont))
		if err != nil {
			return out, fmt.Errorf("listing Pods in cluster %s: %w", r.name, err)
		}
		out = append(out, l.Items...)
		if cont = l.Continue; cont == "" {
			break
		}
	}
	return out, nil
}

// logBytes reads one container log (previous when previous), at most limit bytes; cut says the
// log was longer. It asks the API for no more than it keeps.
func (r *reader) logBytes(ctx context.Context, namespace, pod, container string, previous bool, limit int64) ([]byte, bool, error) {
	opts := &corev1.PodLogOptions{Container: container, Previous: previous, Timestamps: true}
	if limit > 0 {
		lb := limit + 1
		opts.LimitBytes = &lb
	}
	stream, err := r.c.Kube.CoreV1().Pods(namespace).GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("logs of %s/%s container %s%s in cluster %s: %w", namespace, pod, container, prevWord(previous), r.name, err)
	}
	defer stream.Close()
	var src io.Reader = stream
	if limit > 0 {
		src = io.LimitReader(stream, limit+1)
	}
	data, err := io.ReadAll(src)
	if err != nil && ctx.Err() == nil {
		return data, false, fmt.Errorf("reading logs of %s/%s container %s%s: %w", namespace, pod, container, prevWord(previous), err)
	}
	if limit > 0 && int64(len(data)) > limit {
		data = data[:limit]
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		}
		return data, true, nil
	}
	return data, false, nil
}

// readLog reads one container log into the artifact rel (scrubbed), at most limit bytes.
func (r *reader) readLog(ctx context.Context, a *Artifacts, rel, namespace, pod, container string, previous bool, limit int64) (int64, bool, error) {
	data, cut, err := r.logBytes(ctx, namespace, pod, container, previous, limit)
	if err != nil {
		return 0, false, err
	}
	if cut {
		data = append(data, []byte(fmt.Sprintf("# cut at its byte bound of %d bytes\n", limit))...)
	}
	more, err := a.WriteFile(rel, data, 0)
	return int64(len(data)), cut || more, err
}

func prevWord(previous bool) string {
	if previous {
		return " (previous)"
	}
	return ""
}

// clean drops what no reader needs and what could carry a credential by accident: managed
// fields and the last-applied annotation (a copy of whatever was applied).
func clean(u *unstructured.Unstructured) map[string]any {
	o := u.DeepCopy().Object
	unstructured.RemoveNestedField(o, "metadata", "managedFields")
	unstructured.RemoveNestedField(o, "metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration")
	return o
}

// isSecret reports kinds never dumped: their values are the very thing kept out of artifacts.
func isSecret(gk schema.GroupKind) bool {
	return gk.Group == "" && gk.Kind == "Secret"
}

func kindFile(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind
	}
	return gvk.Kind + "." + strings.ReplaceAll(gvk.Group, "/", "_")
}
