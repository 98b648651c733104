package install

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Every class a pool's disk lands on gets a StorageProfile naming an access mode and a volume
// mode: CDI v1.64.0 copies a user-set spec only when each set has both
// (pkg/controller/storageprofile-controller.go lines 107-117), and refuses the chart's disk
// otherwise. The plan shows them.
func TestEveryPoolClassHasAStorageProfileCDIAccepts(t *testing.T) {
	classes := map[string]bool{}
	for _, o := range StorageClasses() {
		classes[o.Obj.GetName()] = true
	}
	profiles := map[string]bool{}
	for _, o := range StorageProfiles() {
		name := o.Obj.GetName()
		if !classes[name] {
			t.Errorf("StorageProfile %s names no StorageClass the harness creates", name)
		}
		sets, _, _ := unstructured.NestedSlice(o.Obj.Object, "spec", "claimPropertySets")
		if len(sets) == 0 {
			t.Errorf("StorageProfile %s: no spec.claimPropertySets", name)
		}
		for _, x := range sets {
			m, _ := x.(map[string]any)
			modes, _, _ := unstructured.NestedStringSlice(m, "accessModes")
			vm, _, _ := unstructured.NestedString(m, "volumeMode")
			if len(modes) == 0 || vm == "" {
				t.Errorf("StorageProfile %s: claim property set %v lacks an access mode or a volume mode", name, m)
			}
		}
		profiles[name] = true
	}
	plan := strings.Join(StoragePlanSection().Lines, "\n")
	for _, c := range PoolStorageClasses {
		if !profiles[c] {
			t.Errorf("pool class %s has no StorageProfile", c)
		}
		if !strings.Contains(plan, "StorageClass "+c) || !strings.Contains(plan, "ReadWriteOnce/Filesystem") {
			t.Errorf("the plan does not show class %s with its profile's modes:\n%s", c, plan)
		}
	}
}
