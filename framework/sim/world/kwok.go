package world

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/cozy-e2e/fixtures"
	"github.com/cozystack/cozy-e2e/framework/controlplane"
)

// pollInterval is how often the world re-reads state it waits for (not a product wait).
const pollInterval = 100 * time.Millisecond

func clientKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// startKwok runs kwok for the management Nodes: the upstream stages plus every fixtures/kwok
// file, and its kubelet server on a free loopback port, so `kubectl logs` reaches it. The Node
// address is 127.0.0.1 and its kubelet port the server's, which kwok writes into each Node's
// status; the apiserver skips verifying kwok's self-signed certificate because it is given no
// kubelet CA. Logs objects (--enable-crds=Logs) say which file a container's log is.
func startKwok(ctx context.Context, tools controlplane.Tools, api *controlplane.APIServer, dir string) (*controlplane.Process, error) {
	configs := []string{tools.KwokStages()}
	extra, err := fixtures.KwokConfigs()
	if err != nil {
		return nil, err
	}
	for _, c := range extra {
		p := filepath.Join(dir, c.Name)
		if err := os.WriteFile(p, c.Data, 0o644); err != nil {
			return nil, err
		}
		configs = append(configs, p)
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	return controlplane.StartKwok(ctx, tools, api, controlplane.KwokOptions{
		Dir: dir, Configs: configs,
		ExtraArgs: []string{
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
			"--node-ip=127.0.0.1", fmt.Sprintf("--node-port=%d", port), fmt.Sprintf("--server-address=127.0.0.1:%d", port),
			"--cidr=10.244.0.1/16", "--node-lease-duration-seconds=40", "--enable-crds=Logs",
		},
	})
}
