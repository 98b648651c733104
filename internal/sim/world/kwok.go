package world

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/fixtures"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
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
//
// With hostJobs, the upstream stages are passed without pod-complete, the stage that ends every
// Job's pod Succeeded as soon as it runs.
func startKwok(ctx context.Context, tools controlplane.Tools, api *controlplane.APIServer, dir string, hostJobs bool) (*controlplane.Process, error) {
	configs := []string{tools.KwokStages()}
	if hostJobs {
		stages, err := withoutStage(tools.KwokStages(), "pod-complete")
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, "kwok-stages.yaml")
		if err := os.WriteFile(p, stages, 0o644); err != nil {
			return nil, err
		}
		configs = []string{p}
	}
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
			"--cidr=" + PodCIDR, "--node-lease-duration-seconds=40", "--enable-crds=Logs",
		},
	})
}

// PodCIDR is the range kwok gives the world's pod IPs (its first address being kwok's own).
const PodCIDR = "10.244.0.1/16"

// withoutStage is the stages file at path without the Stage named name; it fails when there is
// no such stage (the upstream file changed).
func withoutStage(path, name string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kept []string
	found := false
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("world: %s: %w", path, err)
		}
		if head.Kind == "Stage" && head.Metadata.Name == name {
			found = true
			continue
		}
		kept = append(kept, doc)
	}
	if !found {
		return nil, fmt.Errorf("world: %s has no Stage %s", path, name)
	}
	return []byte(strings.Join(kept, "\n---\n")), nil
}
