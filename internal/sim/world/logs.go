package world

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

var logsGVK = schema.GroupVersionKind{Group: "kwok.x-k8s.io", Version: "v1alpha1", Kind: "Logs"}

// logSink places container logs in files and tells kwok about them with one Logs object per
// pod (same namespace and name), one entry per container.
type logSink struct {
	c   *cluster.Cluster
	dir string

	mu    sync.Mutex
	known map[string]string // namespace/pod/container -> path
}

func newLogSink(c *cluster.Cluster, dir string) (*logSink, error) {
	return &logSink{c: c, dir: dir, known: map[string]string{}}, nil
}

func (s *logSink) ContainerLog(ctx context.Context, namespace, pod, container string) (string, error) {
	key := namespace + "/" + pod + "/" + container
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.known[key]; ok {
		return p, nil
	}
	dir := filepath.Join(s.dir, namespace, pod)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, container+".log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	f.Close()
	if err := s.register(ctx, namespace, pod, container, p); err != nil {
		return "", fmt.Errorf("container log %s: telling kwok (Logs %s/%s): %w", key, namespace, pod, err)
	}
	s.known[key] = p
	return p, nil
}

func (s *logSink) register(ctx context.Context, namespace, pod, container, path string) error {
	entry := map[string]any{
		"containers": []any{container}, "logsFile": path, "previousLogsFile": path + simenv.PreviousLogSuffix, "follow": true,
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(logsGVK)
	err := s.c.Client.Get(ctx, clientKey(namespace, pod), obj)
	if apierrors.IsNotFound(err) {
		obj = &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"logs": []any{entry}}}}
		obj.SetGroupVersionKind(logsGVK)
		obj.SetNamespace(namespace)
		obj.SetName(pod)
		return s.c.Client.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	logs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "logs")
	logs = append(logs, entry)
	if err := unstructured.SetNestedSlice(obj.Object, logs, "spec", "logs"); err != nil {
		return err
	}
	return s.c.Client.Update(ctx, obj)
}
