package standin

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
)

// Tenants hands out clients for tenant clusters, built from the Cluster API kubeconfig Secret
// <cluster>-kubeconfig (key value) the control plane provider writes, as CAPK and the Machine
// controller reach the workload cluster. A client is rebuilt when the Secret changes.
type Tenants struct {
	mu      sync.Mutex
	clients map[string]tenantClient
}

type tenantClient struct {
	version string
	c       client.Client
}

// Client is a client for the workload cluster of Cluster namespace/name.
func (t *Tenants) Client(ctx context.Context, c client.Reader, namespace, clusterName string) (client.Client, error) {
	var sec corev1.Secret
	name := clusterName + "-kubeconfig"
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sec); err != nil {
		return nil, fmt.Errorf("workload cluster %s/%s: kubeconfig secret %s: %w", namespace, clusterName, name, err)
	}
	key := namespace + "/" + clusterName
	t.mu.Lock()
	defer t.mu.Unlock()
	if got, ok := t.clients[key]; ok && got.version == sec.ResourceVersion {
		return got.c, nil
	}
	data := sec.Data[names.KubeconfigKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("workload cluster %s/%s: secret %s has no key %q", namespace, clusterName, name, names.KubeconfigKey)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("workload cluster %s/%s: secret %s key %s: %w", namespace, clusterName, name, names.KubeconfigKey, err)
	}
	wc, err := cluster.New("tenant "+key, cfg)
	if err != nil {
		return nil, err
	}
	if t.clients == nil {
		t.clients = map[string]tenantClient{}
	}
	t.clients[key] = tenantClient{version: sec.ResourceVersion, c: wc.Client}
	return wc.Client, nil
}
