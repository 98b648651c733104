package install

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cozystack/cozy-e2e/internal/laneplan"
)

// PoolStorageClasses are the classes a pool's disk lands on: the chart's storageClass value
// (replicated by default, cozystack v1.6.1 packages/apps/kubernetes/values.yaml) or a node
// group's own, which the lanes set to local or leave.
var PoolStorageClasses = []string{"local", "replicated"}

// StorageProfileGVR is CDI's StorageProfile (cdi.kubevirt.io/v1beta1, cluster-scoped, named like
// its StorageClass).
var StorageProfileGVR = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "storageprofiles"}

// ClaimProperty is one claim property set a StorageProfile offers.
type ClaimProperty struct {
	AccessModes []string
	VolumeMode  string
}

// String is "ReadWriteOnce/Filesystem".
func (c ClaimProperty) String() string { return strings.Join(c.AccessModes, ",") + "/" + c.VolumeMode }

// LocalPathClaims is what a rancher.io/local-path volume offers: one node's directory, so one
// node's access, mounted as a filesystem (rancher/local-path-provisioner v0.0.37 provisioner.go
// lines 381-384 refuse any access mode but ReadWriteOnce and ReadWriteOncePod; lines 555-567 make
// every volume Filesystem).
var LocalPathClaims = []ClaimProperty{{AccessModes: []string{"ReadWriteOnce"}, VolumeMode: "Filesystem"}}

// StorageProfiles are CDI's StorageProfiles for the classes the harness creates, each with the
// claim properties of its provisioner in spec.claimPropertySets.
//
// The chart writes a worker's disk as a DataVolume in the storage: form with neither access nor
// volume mode (cozystack v1.6.1 packages/apps/kubernetes/templates/cluster.yaml lines 108-125:
// "the RWX access mode is supplied by the chosen StorageClass's CDI StorageProfile"). CDI v1.64.0
// fills them from the class's StorageProfile status (pkg/controller/datavolume/util.go lines
// 195-203, 409-424) and refuses the claim otherwise ("no accessMode specified in StorageProfile
// <class>"). It fills the status from its table of known provisioners
// (pkg/storagecapabilities/storagecapabilities.go), which has no rancher.io/local-path, unless the
// spec names claim property sets: then it copies them, each needing an access mode and a volume
// mode (pkg/controller/storageprofile-controller.go lines 107-122). The harness names them.
func StorageProfiles() []Object {
	var out []Object
	for _, name := range PoolStorageClasses {
		u := obj("cdi.kubevirt.io/v1beta1", "StorageProfile", "", name)
		u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": FieldOwner})
		var sets []any
		for _, c := range LocalPathClaims {
			modes := make([]any, len(c.AccessModes))
			for i, m := range c.AccessModes {
				modes[i] = m
			}
			sets = append(sets, map[string]any{"accessModes": modes, "volumeMode": c.VolumeMode})
		}
		u.Object["spec"] = map[string]any{"claimPropertySets": sets}
		out = append(out, Object{Source: "internal/install: storage profiles", Obj: u})
	}
	return out
}

// StorageProfilesAccept waits until CDI's StorageProfile of each pool class offers an access
// mode (status.claimPropertySets[0].accessModes, what CDI reads, util.go lines 417-421). A
// profile CDI reconciled (status.storageClass set) without one, and whose spec gives no claim
// property sets for CDI's next pass to copy, is final: CDI would refuse every pool disk on that
// class, so the phase fails at once with CDI's own words.
func StorageProfilesAccept(ctx context.Context, dyn dynamic.Interface, o GateOptions) error {
	what := "CDI StorageProfiles of " + strings.Join(PoolStorageClasses, ", ") + " offering an access mode"
	err := Wait(ctx, dyn, Watch{GVR: StorageProfileGVR}, what, o.Log, judgeProfiles)
	if err != nil {
		return err
	}
	if o.Record != nil {
		fmt.Fprintf(o.Record, "ok     %-24s %s\n", "storage-profiles", strings.Join(PoolStorageClasses, ", ")+": "+LocalPathClaims[0].String())
	}
	return nil
}

// judgeProfiles is the StorageProfile gate's judge: done when every pool class's profile offers
// an access mode, an error when CDI reconciled one to none.
func judgeProfiles(objs []*unstructured.Unstructured) (bool, string, error) {
	have := index(objs)
	var waiting []string
	for _, name := range PoolStorageClasses {
		sp := have[name]
		if sp == nil {
			waiting = append(waiting, "StorageProfile "+name+" not created by CDI yet")
			continue
		}
		sets := ProfileClaims(sp)
		if len(sets) > 0 && len(sets[0].AccessModes) > 0 {
			continue
		}
		if sc, _, _ := unstructured.NestedString(sp.Object, "status", "storageClass"); sc == "" {
			waiting = append(waiting, "StorageProfile "+name+" not reconciled by CDI yet")
			continue
		}
		// CDI copies spec.claimPropertySets into the status when it reconciles the profile
		// (kubevirt.io/containerized-data-importer v1.64.0
		// pkg/controller/storageprofile-controller.go:109-122, Status.ClaimPropertySets), and the
		// profile records no generation it reconciled: given sets not in the status yet are
		// a profile CDI has not reconciled since they were written, not a refusal.
		if given, _, _ := unstructured.NestedSlice(sp.Object, "spec", "claimPropertySets"); len(given) > 0 {
			waiting = append(waiting, "StorageProfile "+name+": CDI has not reconciled its spec.claimPropertySets yet")
			continue
		}
		prov, _, _ := unstructured.NestedString(sp.Object, "status", "provisioner")
		return false, "", fmt.Errorf("CDI's StorageProfile %s (provisioner %s) has no access mode in status.claimPropertySets: CDI refuses the claim of every pool disk on class %s "+
			"(\"no accessMode specified in StorageProfile %s\"); give the profile spec.claimPropertySets (internal/install/storage.go StorageProfiles)", name, prov, name, name)
	}
	sort.Strings(waiting)
	return len(waiting) == 0, strings.Join(waiting, "; "), nil
}

// ProfileClaims are a StorageProfile's status.claimPropertySets.
func ProfileClaims(sp *unstructured.Unstructured) []ClaimProperty {
	sets, _, _ := unstructured.NestedSlice(sp.Object, "status", "claimPropertySets")
	var out []ClaimProperty
	for _, s := range sets {
		m, _ := s.(map[string]any)
		modes, _, _ := unstructured.NestedStringSlice(m, "accessModes")
		vm, _, _ := unstructured.NestedString(m, "volumeMode")
		out = append(out, ClaimProperty{AccessModes: modes, VolumeMode: vm})
	}
	return out
}

// StoragePlanSection is the lane plan's storage block: each StorageClass the harness creates, its
// provisioner and binding, and the access and volume modes its CDI StorageProfile offers the
// pool disks (what CDI puts on their claims).
func StoragePlanSection() laneplan.Section {
	sec := laneplan.Section{Title: "storage (internal/install; the sim's storage is set up by the same code, judged by the real cdi-controller)"}
	profiles := map[string]string{}
	for _, o := range StorageProfiles() {
		sets, _, _ := unstructured.NestedSlice(o.Obj.Object, "spec", "claimPropertySets")
		var parts []string
		for _, x := range sets {
			m, _ := x.(map[string]any)
			modes, _, _ := unstructured.NestedStringSlice(m, "accessModes")
			vm, _, _ := unstructured.NestedString(m, "volumeMode")
			parts = append(parts, ClaimProperty{AccessModes: modes, VolumeMode: vm}.String())
		}
		profiles[o.Obj.GetName()] = strings.Join(parts, " ")
	}
	for _, o := range StorageClasses() {
		name := o.Obj.GetName()
		prov, _, _ := unstructured.NestedString(o.Obj.Object, "provisioner")
		binding, _, _ := unstructured.NestedString(o.Obj.Object, "volumeBindingMode")
		profile := profiles[name]
		if profile == "" {
			profile = "none set (kind's own class; no pool uses it)"
		}
		sec.Lines = append(sec.Lines, fmt.Sprintf("StorageClass %-11s %s, %s; StorageProfile access/volume mode: %s",
			name, prov, orDefault(binding, "binding mode left as the cluster has it"), profile))
	}
	sec.Lines = append(sec.Lines, "gate (component cdi): CDI's StorageProfile of "+strings.Join(PoolStorageClasses, ", ")+" offers an access mode, else the components phase fails")
	return sec
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
