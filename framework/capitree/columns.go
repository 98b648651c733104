package capitree

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gobuffalo/flect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/tree"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cells are obj's row but for its NAME, and the message for its MESSAGE column: the replica
// counts of the kinds that have them, and the condition clusterctl v1.13.6 shows for the kind
// (Available for a Cluster or a MachineDeployment, Ready for the rest). A virtual object (the
// Workers group) shows nothing; a group of Machines shows its counts and names its first two.
func (d *drawing) cells(obj client.Object) (row, string) {
	var r row
	if tree.IsGroupObject(obj) {
		r[2] = strconv.Itoa(tree.GetGroupItemsAvailableCounter(obj))
		r[3] = strconv.Itoa(tree.GetGroupItemsReadyCounter(obj))
		r[4] = strconv.Itoa(tree.GetGroupItemsUpToDateCounter(obj))
	} else if tree.IsVirtualObject(obj) {
		return r, ""
	}
	var c *metav1.Condition
	switch o := obj.(type) {
	case *clusterv1.Cluster:
		var cp clusterv1.ClusterControlPlaneStatus
		var w clusterv1.WorkersStatus
		if o.Status.ControlPlane != nil {
			cp = *o.Status.ControlPlane
		}
		if o.Status.Workers != nil {
			w = *o.Status.Workers
		}
		r[1] = fraction(sum(cp.Replicas, w.Replicas), sum(cp.DesiredReplicas, w.DesiredReplicas))
		r[2], r[3], r[4] = count(sum(cp.AvailableReplicas, w.AvailableReplicas)), count(sum(cp.ReadyReplicas, w.ReadyReplicas)), count(sum(cp.UpToDateReplicas, w.UpToDateReplicas))
		c = tree.GetAvailableCondition(obj)
	case *clusterv1.MachineDeployment:
		r[1] = fraction(o.Status.Replicas, o.Spec.Replicas)
		r[2], r[3], r[4] = count(o.Status.AvailableReplicas), count(o.Status.ReadyReplicas), count(o.Status.UpToDateReplicas)
		c = tree.GetAvailableCondition(obj)
	case *clusterv1.MachinePool: // like a MachineDeployment; no golden case has one
		r[1] = fraction(o.Status.Replicas, o.Spec.Replicas)
		r[2], r[3], r[4] = count(o.Status.AvailableReplicas), count(o.Status.ReadyReplicas), count(o.Status.UpToDateReplicas)
		c = tree.GetAvailableCondition(obj)
	case *clusterv1.Machine:
		r[1] = "1"
		r[2], r[3], r[4] = isTrue(tree.GetAvailableCondition(obj)), isTrue(tree.GetReadyCondition(obj)), isTrue(tree.GetMachineUpToDateCondition(obj))
		c = tree.GetReadyCondition(obj)
	case *unstructured.Unstructured:
		if tree.GetObjectContract(o) == "ControlPlane" {
			controlPlaneCounts(o, &r)
		}
		c = tree.GetReadyCondition(obj)
	default:
		c = tree.GetReadyCondition(obj)
	}
	msg := ""
	if c != nil {
		r[5], r[6], r[7], msg = string(c.Status), c.Reason, d.since(*c), c.Message
	}
	if tree.IsGroupObject(obj) {
		msg = "See " + groupNames(obj)
	}
	return r, msg
}

// controlPlaneCounts fills the counts of a control plane from the fields its contract names:
// v1beta1 has no available replicas and calls the up-to-date ones updated.
func controlPlaneCounts(o *unstructured.Unstructured, r *row) {
	field := func(path ...string) *int32 {
		v, ok, err := unstructured.NestedInt64(o.Object, path...)
		if !ok || err != nil {
			return nil
		}
		n := int32(v)
		return &n
	}
	r[1] = fraction(field("status", "replicas"), field("spec", "replicas"))
	r[3] = count(field("status", "readyReplicas"))
	if tree.GetObjectContractVersion(o) == "v1beta1" {
		r[4] = count(field("status", "updatedReplicas"))
		return
	}
	r[2], r[4] = count(field("status", "availableReplicas")), count(field("status", "upToDateReplicas"))
}

// sum adds the counts that are set; nil when none is.
func sum(ns ...*int32) *int32 {
	var total *int32
	for _, n := range ns {
		if n != nil {
			t := *n
			if total != nil {
				t += *total
			}
			total = &t
		}
	}
	return total
}

func count(n *int32) string {
	if n == nil {
		return ""
	}
	return strconv.Itoa(int(*n))
}

// fraction is "current/desired", a missing side counted as 0; blank when both are missing.
func fraction(current, desired *int32) string {
	if current == nil && desired == nil {
		return ""
	}
	var c, d int32
	if current != nil {
		c = *current
	}
	if desired != nil {
		d = *desired
	}
	return fmt.Sprintf("%d/%d", c, d)
}

// isTrue is a Machine's share of a count: 1 when c is True, else 0.
func isTrue(c *metav1.Condition) string {
	if c != nil && c.Status == metav1.ConditionTrue {
		return "1"
	}
	return "0"
}

// groupNames is the MESSAGE of a group row: its first two items, "..." when there are more.
func groupNames(obj client.Object) string {
	items := strings.Split(tree.GetGroupItems(obj), tree.GroupItemsSeparator)
	if len(items) > 2 {
		return strings.Join(items[:2], tree.GroupItemsSeparator) + tree.GroupItemsSeparator + "..."
	}
	return strings.Join(items, tree.GroupItemsSeparator)
}

// rowName is an object's NAME cell after the tree drawing: "N Machines..." for a group,
// the name alone for a virtual object, else Kind/name after the role the tree gives the
// object ("ControlPlane - ").
func rowName(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	switch {
	case tree.IsGroupObject(obj):
		n := len(strings.Split(tree.GetGroupItems(obj), tree.GroupItemsSeparator))
		return fmt.Sprintf("%d %s...", n, flect.Pluralize(strings.TrimSuffix(kind, "Group")))
	case tree.IsVirtualObject(obj):
		return obj.GetName()
	}
	name := kind + "/" + obj.GetName()
	if role := tree.GetMetaName(obj); role != "" {
		name = role + " - " + name
	}
	return name
}

// zeroWhenFalse are the conditions clusterctl v1.13.6 counts as nothing to report when False
// (seen hidden by a "Kind+" filter), the others when True.
var zeroWhenFalse = map[string]bool{
	"Paused": true, "Deleting": true, "RollingOut": true, "ScalingUp": true, "ScalingDown": true,
	"Remediating": true, "Updating": true,
}

// notable says whether a "Kind+" (non-zero) filter shows c: Available and Ready always, any
// other condition when it has a message or a status other than its quiet one.
func notable(c metav1.Condition) bool {
	if c.Type == clusterv1.AvailableCondition || c.Type == clusterv1.ReadyCondition || c.Message != "" {
		return true
	}
	quiet := metav1.ConditionTrue
	if zeroWhenFalse[c.Type] {
		quiet = metav1.ConditionFalse
	}
	return c.Status != quiet
}
