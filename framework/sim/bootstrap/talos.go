package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/sim/faults"
	"github.com/cozystack/cozy-e2e/framework/sim/names"
	"github.com/cozystack/cozy-e2e/framework/sim/standin"
)

// TalosKubeletImage is the kubelet image repository a Talos worker runs.
const TalosKubeletImage = "ghcr.io/siderolabs/kubelet"

// talos reconciles TalosConfigs as CABPT v0.6 does for workers: generateType "none" takes
// spec.data as the machine configuration, "worker" generates one; spec.configPatches (RFC 6902
// add/replace/remove) and spec.strategicPatches (merged) apply to both; spec.hostname sets
// machine.network.hostname. The data lands in Secret <machine>-bootstrap-data.
type talos struct{ base }

func (r *talos) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s, err := r.load(ctx, names.TalosConfigGVK, req.NamespacedName)
	if err != nil || s == nil {
		return ctrl.Result{}, err
	}
	cfg := s.config
	if ready, _, _ := unstructured.NestedBool(cfg.Object, "status", "ready"); ready {
		return ctrl.Result{}, nil
	}
	if !infrastructureProvisioned(s.cluster) {
		standin.SetConditions(cfg, r.now(),
			standin.False("Ready", "Info", WaitingForClusterInfrastructure, ""),
			standin.False(DataSecretAvailable, "Info", WaitingForClusterInfrastructure, ""))
		return ctrl.Result{}, r.updateStatus(ctx, cfg)
	}
	data, err := r.machineConfig(s)
	if err != nil {
		standin.SetConditions(cfg, r.now(),
			standin.False("Ready", "Error", TalosGenerationFailed, err.Error()),
			standin.False(DataSecretAvailable, "Error", TalosGenerationFailed, err.Error()))
		return ctrl.Result{}, r.updateStatus(ctx, cfg)
	}
	name := s.machine.Name + "-bootstrap-data"
	if err := r.writeSecret(ctx, s, name, "", data); err != nil {
		return ctrl.Result{}, err
	}
	_ = unstructured.SetNestedField(cfg.Object, name, "status", "dataSecretName")
	_ = unstructured.SetNestedField(cfg.Object, true, "status", "ready")
	standin.SetConditions(cfg, r.now(), standin.True("Ready"), standin.True(DataSecretAvailable))
	return ctrl.Result{}, r.updateStatus(ctx, cfg)
}

// machineConfig is the worker's Talos machine configuration.
func (r *talos) machineConfig(s *scope) ([]byte, error) {
	spec, _, _ := unstructured.NestedMap(s.config.Object, "spec")
	doc := map[string]any{}
	switch gen, _ := spec["generateType"].(string); gen {
	case "none":
		data, _ := spec["data"].(string)
		if strings.TrimSpace(data) == "" {
			return nil, fmt.Errorf("failed to specify config data with none generate type")
		}
		if err := yaml.Unmarshal([]byte(data), &doc); err != nil {
			return nil, fmt.Errorf("spec.data is not a Talos machine configuration: %w", err)
		}
	case "worker", "join":
		doc = generatedWorker(s)
	default:
		return nil, fmt.Errorf("generate type %q: the sim's Talos provider generates worker configurations only (worker, join or none)", gen)
	}
	if patches, ok := spec["configPatches"].([]any); ok {
		for i, p := range patches {
			if err := applyJSONPatch(doc, p); err != nil {
				return nil, fmt.Errorf("spec.configPatches[%d]: %w", i, err)
			}
		}
	}
	if patches, ok := spec["strategicPatches"].([]any); ok {
		for i, p := range patches {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(fmt.Sprint(p)), &m); err != nil {
				return nil, fmt.Errorf("spec.strategicPatches[%d]: %w", i, err)
			}
			merge(doc, m)
		}
	}
	hostname := ""
	switch src, _, _ := unstructured.NestedString(spec, "hostname", "source"); src {
	case "MachineName":
		hostname = s.machine.Name
	case "InfrastructureName":
		hostname = s.machine.Spec.InfrastructureRef.Name
	}
	if standin.PoolOfMachine(s.machine).Active(r.env, faults.ProviderIDMissing) {
		// The machine configuration names a host of its own (Talos' talos-xxx-yyy scheme), so
		// the Node will not be named like the VMI.
		hostname = "talos-" + randHex(3) + "-" + randHex(3)
	}
	if hostname != "" {
		merge(doc, map[string]any{"machine": map[string]any{"network": map[string]any{"hostname": hostname}}})
	}
	return yaml.Marshal(doc)
}

// generatedWorker is what CABPT generates for generateType worker.
func generatedWorker(s *scope) map[string]any {
	ep := s.cluster.Spec.ControlPlaneEndpoint
	return map[string]any{
		"version": "v1alpha1", "debug": false, "persist": true,
		"machine": map[string]any{
			"type":    "worker",
			"token":   randHex(3) + "." + randHex(8),
			"kubelet": map[string]any{"image": TalosKubeletImage + ":" + s.machine.Spec.Version},
			"install": map[string]any{"disk": "/dev/vda"},
		},
		"cluster": map[string]any{
			"clusterName":  s.cluster.Name,
			"controlPlane": map[string]any{"endpoint": "https://" + ep.Host + ":" + strconv.Itoa(int(ep.Port))},
			"network":      map[string]any{"dnsDomain": "cluster.local"},
		},
	}
}

// merge merges src into dst: maps recursively, everything else replaced.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// applyJSONPatch applies one RFC 6902 add, replace or remove on object paths.
func applyJSONPatch(doc map[string]any, p any) error {
	op, _ := p.(map[string]any)
	kind, _ := op["op"].(string)
	path, _ := op["path"].(string)
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if path == "" || len(parts) == 0 {
		return fmt.Errorf("empty path")
	}
	cur := doc
	for _, part := range parts[:len(parts)-1] {
		part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
		next, ok := cur[part].(map[string]any)
		if !ok {
			if kind != "add" {
				return fmt.Errorf("%s %s: %q does not exist", kind, path, part)
			}
			next = map[string]any{}
			cur[part] = next
		}
		cur = next
	}
	last := strings.NewReplacer("~1", "/", "~0", "~").Replace(parts[len(parts)-1])
	switch kind {
	case "add", "replace":
		cur[last] = op["value"]
	case "remove":
		delete(cur, last)
	default:
		return fmt.Errorf("op %q on %s: the sim applies add, replace and remove", kind, path)
	}
	return nil
}

func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
