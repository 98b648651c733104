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

// A profile CDI reconciled before the harness gave it claim property sets is waited for, not
// refused: CDI copies the sets into the status on its next pass; one reconciled with none given
// and none in the status is refused at once with CDI's words.
func TestAProfileCDIHasNotReconciledSinceItsSetsWereGivenIsWaitedFor(t *testing.T) {
	profile := func(name string, given bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"status": map[string]any{"storageClass": name, "provisioner": "rancher.io/local-path"},
		}}
		u.SetName(name)
		if given {
			u.Object["spec"] = map[string]any{"claimPropertySets": []any{map[string]any{"accessModes": []any{"ReadWriteOnce"}, "volumeMode": "Filesystem"}}}
		}
		return u
	}
	var objs []*unstructured.Unstructured
	for _, c := range PoolStorageClasses {
		objs = append(objs, profile(c, true))
	}
	done, waiting, err := judgeProfiles(objs)
	if err != nil || done || !strings.Contains(waiting, "CDI has not reconciled its spec.claimPropertySets yet") {
		t.Errorf("sets given, status not caught up: done %v, waiting %q, err %v; want a wait naming the profile's unreconciled sets", done, waiting, err)
	}
	objs[0] = profile(PoolStorageClasses[0], false)
	if _, _, err := judgeProfiles(objs); err == nil || !strings.Contains(err.Error(), "has no access mode") {
		t.Errorf("no sets given, none in the status: %v, want the refusal", err)
	}
}
