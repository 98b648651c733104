package suiterun

//lint:file-ignore SA1019 the spec reads a MachineDeployment at v1beta1 as the v1beta1 providers do, through the conversion webhook.

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// MachineDeploymentVersionsSpecInput names the MachineDeployment to read.
type MachineDeploymentVersionsSpecInput struct {
	Management *cluster.Cluster
	Pool       tenant.PoolNames
	// Before runs first, with the spec's context (the suite ends the pools phase there once
	// every join ended); nil: nothing.
	Before func(context.Context)
}

// MachineDeploymentVersionsSpec registers one spec: a MachineDeployment reads the same at
// v1beta1 and v1beta2 (one resourceVersion, the fields both carry).
func MachineDeploymentVersionsSpec(_ context.Context, inputGetter func() MachineDeploymentVersionsSpecInput) {
	It("a MachineDeployment reads the same at v1beta1 and v1beta2", Label("api-versions"), func(ctx SpecContext) {
		in := inputGetter()
		if in.Before != nil {
			in.Before(ctx)
		}
		p := in.Pool
		AddReportEntry("machinedeployment", p.MachineDeployment())
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.MachineDeployment()}
		c := in.Management.Client
		// Both reads must see one state of the object (one resourceVersion): a controller
		// writing its status between them is not a disagreement. A few tries get a consistent pair.
		var v1 clusterv1beta1.MachineDeployment
		var v2 clusterv1.MachineDeployment
		for try := 0; try < 5; try++ {
			Expect(c.Get(ctx, key, &v2)).To(Succeed(), "MachineDeployment %s at v1beta2", key)
			Expect(c.Get(ctx, key, &v1)).To(Succeed(), "MachineDeployment %s at v1beta1", key)
			if v1.ResourceVersion == v2.ResourceVersion {
				break
			}
		}
		Expect(v1.ResourceVersion).To(Equal(v2.ResourceVersion), "MachineDeployment %s kept changing between its two reads", key)
		Expect(v1.APIVersion).To(Or(BeEmpty(), Equal(clusterv1beta1.GroupVersion.String())))
		Expect(v1.UID).To(Equal(v2.UID), "one object")
		Expect(v1.Spec.ClusterName).To(Equal(v2.Spec.ClusterName), "clusterName")
		Expect(v1.Spec.Replicas).To(Equal(v2.Spec.Replicas), "spec.replicas")
		Expect(v1.Spec.Selector).To(Equal(v2.Spec.Selector), "spec.selector")
		Expect(v1.Spec.Template.Spec.Version).To(HaveValue(Equal(v2.Spec.Template.Spec.Version)), "template version")
		Expect(v1.Spec.Template.Spec.Bootstrap.ConfigRef).NotTo(BeNil(), "v1beta1 bootstrap.configRef")
		Expect(v1.Spec.Template.Spec.Bootstrap.ConfigRef.Kind).To(Equal(v2.Spec.Template.Spec.Bootstrap.ConfigRef.Kind), "bootstrap.configRef.kind")
		Expect(v1.Spec.Template.Spec.Bootstrap.ConfigRef.Name).To(Equal(v2.Spec.Template.Spec.Bootstrap.ConfigRef.Name), "bootstrap.configRef.name")
		Expect(v1.Spec.Template.Spec.InfrastructureRef.Name).To(Equal(v2.Spec.Template.Spec.InfrastructureRef.Name), "infrastructureRef.name")
		Expect(v1.Status.V1Beta2).NotTo(BeNil(), "v1beta1 status.v1beta2")
		Expect(v1.Status.V1Beta2.ReadyReplicas).To(Equal(v2.Status.ReadyReplicas), "ready replicas: v1beta1 status.v1beta2.readyReplicas against v1beta2 status.readyReplicas")
		// v1beta2 leaves status.replicas unset until the MachineSets report; v1beta1 reads it as 0.
		Expect(ptr.Deref(v2.Status.Replicas, 0)).To(BeEquivalentTo(v1.Status.Replicas), "status.replicas")
	})
}
