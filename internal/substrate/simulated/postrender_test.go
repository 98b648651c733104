package simulated

import (
	"encoding/json"
	"testing"
)

// The post-renderers a real Node's lane gives the chart's workers: the disk whose guest joins by
// itself from the local registry, masquerade, virtio-rng and the real Node; as one kustomize
// patch of the KubevirtMachineTemplates, which helm-controller applies.
func TestRealNodePostRenderersGiveTheJoiningDisk(t *testing.T) {
	for _, c := range []struct {
		guestJoin bool
		want      string
	}{
		{true, "docker://192.0.2.2:5000/worker-disk-join:latest"},
	} {
		prs := realNodePostRenderers("192.0.2.2:5000")
		if len(prs) != 1 {
			t.Fatalf("%d post-renderers, want one", len(prs))
		}
		k := prs[0].(map[string]any)["kustomize"].(map[string]any)["patches"].([]any)[0].(map[string]any)
		if tg := k["target"].(map[string]any); tg["kind"] != "KubevirtMachineTemplate" || tg["group"] != "infrastructure.cluster.x-k8s.io" {
			t.Errorf("target %v", tg)
		}
		var ops []struct {
			Op, Path string
			Value    any
		}
		if err := json.Unmarshal([]byte(k["patch"].(string)), &ops); err != nil {
			t.Fatal(err)
		}
		paths := map[string]any{}
		for _, o := range ops {
			paths[o.Path] = o.Value
		}
		vm := "/spec/template/spec/virtualMachineTemplate/spec"
		src, _ := paths[vm+"/dataVolumeTemplates/0/spec/source"].(map[string]any)
		if reg, _ := src["registry"].(map[string]any); reg["url"] != c.want {
			t.Errorf("guestJoin %v: disk source %v, want %s", c.guestJoin, src, c.want)
		}
		if nic, _ := paths[vm+"/template/spec/domain/devices/interfaces/0"].(map[string]any); nic["masquerade"] == nil {
			t.Errorf("guestJoin %v: interface %v, want masquerade", c.guestJoin, nic)
		}
		for _, p := range []string{vm + "/template/spec/nodeSelector", vm + "/template/spec/tolerations", vm + "/template/spec/domain/devices/rng"} {
			if paths[p] == nil {
				t.Errorf("guestJoin %v: no %s", c.guestJoin, p)
			}
		}
	}
}
