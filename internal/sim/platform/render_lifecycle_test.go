package platform

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
