package platform

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/sim/faults"
)

func mhcSpec(t *testing.T, o Options, p map[string]any) map[string]any {
	t.Helper()
	r, err := Render(app(map[string]any{"md0": p}), classes, Live{}, o)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(find(r.Objects, "MachineHealthCheck", "kubernetes-t1-md0").Object, "spec")
	return spec
}

// A pool's maxUnhealthy and nodeStartupTimeout override the cluster-wide values, a percentage
// rendered as a string and a bare integer as a number; anything else is refused naming them.
func TestAPoolOverridesItsMachineHealthCheck(t *testing.T) {
	o := opts()
	spec := mhcSpec(t, o, pool(nil))
	if spec["maxUnhealthy"] != "50%" || spec["nodeStartupTimeout"] != "20m0s" {
		t.Fatalf("defaults: %v %v", spec["maxUnhealthy"], spec["nodeStartupTimeout"])
	}
	spec = mhcSpec(t, o, pool(map[string]any{"maxUnhealthy": "100%", "nodeStartupTimeout": "30s"}))
	if spec["maxUnhealthy"] != "100%" || spec["nodeStartupTimeout"] != "30s" {
		t.Fatalf("overrides: %v %v", spec["maxUnhealthy"], spec["nodeStartupTimeout"])
	}
	if spec = mhcSpec(t, o, pool(map[string]any{"maxUnhealthy": "1"})); spec["maxUnhealthy"] != int64(1) {
		t.Fatalf("a bare integer: %#v", spec["maxUnhealthy"])
	}
	_, err := Render(app(map[string]any{"md0": pool(map[string]any{"maxUnhealthy": "half"})}), classes, Live{}, o)
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Field != "maxUnhealthy" {
		t.Fatalf("%v", err)
	}
}

// Under mhc-blocked the targeted pool's own maxUnhealthy is dropped for the chart's 50%.
func TestMHCBlockedDropsThePoolsMaxUnhealthy(t *testing.T) {
	set, err := faults.Parse("mhc-blocked@md0")
	if err != nil {
		t.Fatal(err)
	}
	o := opts()
	o.Health.MaxUnhealthy = "100%"
	o.Faults = set
	if spec := mhcSpec(t, o, pool(map[string]any{"maxUnhealthy": "100%"})); spec["maxUnhealthy"] != "50%" {
		t.Fatalf("maxUnhealthy %v under mhc-blocked, want the chart's 50%%", spec["maxUnhealthy"])
	}
	if spec := mhcSpec(t, o, pool(nil)); spec["maxUnhealthy"] != "100%" {
		t.Fatalf("a pool that sets none keeps the sim's: %v", spec["maxUnhealthy"])
	}
}

// resources.cpu is the VM's cores, so changing it renders another machine template.
func TestTheCPUOfAPoolIsItsCores(t *testing.T) {
	tmpl := func(cpu any) (string, any) {
		r, err := Render(app(map[string]any{"md0": pool(map[string]any{"resources": map[string]any{"cpu": cpu, "memory": "4Gi"}})}), classes, Live{}, opts())
		if err != nil {
			t.Fatal(err)
		}
		k := find(r.Objects, "KubevirtMachineTemplate", "kubernetes-t1-md0-")
		cores, _, _ := unstructured.NestedFieldNoCopy(k.Object, "spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain", "cpu", "cores")
		return k.GetName(), cores
	}
	n1, c1 := tmpl("1")
	n2, c2 := tmpl("2")
	if c1 != int64(1) || c2 != int64(2) || n1 == n2 {
		t.Fatalf("cpu 1: %s %v; cpu 2: %s %v", n1, c1, n2, c2)
	}
}
