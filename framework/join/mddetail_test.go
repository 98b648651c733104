package join

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// A pool with no Machine yet says why Cluster API makes none, in its own words, and that they
// are from its last pass; without a blocked ScalingUp it says what the MachineDeployment wants.
func TestAPoolWithoutMachinesNamesTheTemplateClusterAPIDidNotFind(t *testing.T) {
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes-classes-x-kairos"},
		Spec:       clusterv1.MachineDeploymentSpec{Replicas: ptr.To[int32](1)},
	}
	if got, want := mdDetail(md, followed{}), "MachineDeployment kubernetes-classes-x-kairos wants 1"; got != want {
		t.Errorf("no condition: %q, want %q", got, want)
	}
	md.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineDeploymentScalingUpCondition, Status: metav1.ConditionTrue, ObservedGeneration: 2,
		Reason: clusterv1.MachineDeploymentScalingUpReason, Message: "Scaling up from 0 to 1 replicas is blocked because KairosConfigTemplate does not exist"}}
	got := mdDetail(md, followed{})
	for _, want := range []string{"wants 1", "ScalingUp: Scaling up from 0 to 1 replicas is blocked because KairosConfigTemplate does not exist", "generation 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("blocked: %q lacks %q", got, want)
		}
	}
	md.Status.Conditions[0].Message = "Scaling up from 0 to 1 replicas"
	if got := mdDetail(md, followed{}); strings.Contains(got, "ScalingUp") {
		t.Errorf("scaling up unblocked is no reason to name: %q", got)
	}
}
