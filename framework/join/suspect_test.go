package join

//lint:file-ignore SA1019 the tests set the v1beta1 failure fields and conditions providers at the v1beta1 contract write.

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capierrors "sigs.k8s.io/cluster-api/errors"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// The states below are ones upstream retries or repairs: each is at most a suspect, with the
// class its failure would have, and the pool goes on waiting where it stands.

// A provider's failureReason is no final state: the Kairos provider clears it on its next
// success, CAPK's and the Machine's copy are never cleared, CABPT retries its generation.
func TestAProviderFailureReasonIsNoFinalState(t *testing.T) {
	for _, tc := range []struct {
		name   string
		os     string
		class  verdict.Class
		stage  Stage
		break_ func(v *machineView)
	}{
		{"kairos config failureReason", osfamily.Kairos, verdict.Bootstrap, StageBootstrapData, func(v *machineView) {
			v.Machine.Spec.Bootstrap.DataSecretName = nil
			v.BootstrapConfig = failedObject(mustFamily(osfamily.Kairos).BootstrapConfig, "BootstrapDataSecretGenerationFailed",
				`get user password secret tenant-x/pw: secrets "pw" not found`)
		}},
		{"talos config DataSecretGenerationFailed", osfamily.Talos, verdict.Bootstrap, StageBootstrapData, func(v *machineView) {
			v.Machine.Spec.Bootstrap.DataSecretName = nil
			v.BootstrapConfig = &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
				map[string]any{"type": "DataSecretAvailable", "status": "False", "reason": "DataSecretGenerationFailed", "severity": "Error",
					"message": "failed to generate machine config", "lastTransitionTime": "2026-12-02T10:00:00Z"}}}}}
			v.BootstrapConfig.SetGroupVersionKind(mustFamily(osfamily.Talos).BootstrapConfig)
			v.BootstrapConfig.SetName("m1")
		}},
		{"kubevirt machine failureReason", osfamily.Kairos, verdict.MachineFailed, StageDiskImport, func(v *machineView) {
			v.DataVolume = nil
			v.KubevirtMachine = failedObject(tenant.KubevirtMachineGVK, "UpdateError", "The Machine's VM pod is marked for eviction due to infra node drain.")
		}},
		{"node annotation of another value", osfamily.Talos, verdict.Identity, StageNodeRef, func(v *machineView) {
			v.Node.Annotations[tenant.AnnotationClusterNamespace] = "default"
			v.Machine.Status.NodeRef.Name = ""
		}},
		{"machine failureReason of Cluster API's own", osfamily.Talos, verdict.MachineFailed, StageWorkloadPod, func(v *machineView) {
			reason, msg := capierrors.InvalidConfigurationMachineError, "Machine infrastructure resource KubevirtMachine m1 has been deleted after provisioning was completed"
			v.Machine.Status.Deprecated = &clusterv1.MachineDeprecatedStatus{V1Beta1: &clusterv1.MachineV1Beta1DeprecatedStatus{FailureReason: &reason, FailureMessage: &msg}}
			v.Workload = nil
		}},
	} {
		p := testPool(tc.os, 1)
		v := joined(p, "m1")
		tc.break_(v)
		s := withTemplate(p, v)
		s.KubeletConfig = kubeletConfig("clusterDNS: [10.95.0.10]\n")
		out := evaluate(s)
		if out.Terminal != nil || out.Stage != tc.stage {
			t.Errorf("%s: got stage %s terminal %+v; want the pool waiting at %s", tc.name, out.Stage, out.Terminal, tc.stage)
		}
		if len(out.Suspects) != 1 || out.Suspects[0].Class != tc.class || out.Suspects[0].Stage != tc.stage { //after
			t.Errorf("%s: suspects %+v; want one of class %s at %s", tc.name, out.Suspects, tc.class, tc.stage) //after
		} //after
	}
}

// Cluster API copies a provider's failure onto the Machine and never clears it there: once the
// provider's object shows none, the copy is stale and no suspect.
func TestAStaleCopyOfAProviderFailureIsNoSuspect(t *testing.T) {
	p := testPool(osfamily.Kairos, 1)
	v := joined(p, "m1")
	reason := capierrors.MachineStatusError("BootstrapDataSecretGenerationFailed")
	msg := `Failure detected from referenced resource bootstrap.cluster.x-k8s.io/v1beta2, Kind=KairosConfig with name "m1": secrets "pw" not found`
	v.Machine.Status.Deprecated = &clusterv1.MachineDeprecatedStatus{V1Beta1: &clusterv1.MachineV1Beta1DeprecatedStatus{FailureReason: &reason, FailureMessage: &msg}}
	s := withTemplate(p, v)
	s.KubeletConfig = kubeletConfig("clusterDNS: [10.95.0.10]\n")
	out := evaluate(s)
	if !out.Done || out.Terminal != nil {
		t.Fatalf("%+v %+v", out, out.Terminal)
	}
	if len(out.Suspects) != 0 { //after
		t.Fatalf("suspects %+v", out.Suspects) //after
	} //after
}

// A MachineSet whose clone failed is retried by Cluster API; only the API's refusal of the
// cloned object is final.
func TestAFailedCloneWaitsUnlessTheAPIRefusedIt(t *testing.T) {
	p := testPool(osfamily.Kairos, 1)
	set := func(reason, msg string) *snapshot {
		ms := clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "ms-1"}, Status: clusterv1.MachineSetStatus{Deprecated: &clusterv1.MachineSetDeprecatedStatus{
			V1Beta1: &clusterv1.MachineSetV1Beta1DeprecatedStatus{Conditions: clusterv1.Conditions{{Type: clusterv1.MachinesCreatedV1Beta1Condition,
				Status: corev1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))}}}}}}
		s := withTemplate(p)
		s.MachineSets = []clusterv1.MachineSet{ms}
		return s
	}
	for _, tc := range []struct {
		name, reason, msg string
		final             verdict.Class // "" for a suspect
	}{
		{"webhook unreachable", clusterv1.BootstrapTemplateCloningFailedV1Beta1Reason,
			`failed to create BootstrapConfig: failed to apply KairosConfig: Internal error occurred: failed calling webhook "vkairosconfig.kb.io": failed to call webhook: Post "https://capi-kairos-webhook-service.cozy-cluster-api.svc:443/validate-bootstrap-cluster-x-k8s-io-v1beta2-kairosconfig?timeout=10s": dial tcp 10.96.12.7:443: connect: connection refused`, ""},
		{"a conflict", clusterv1.MachineCreationFailedV1Beta1Reason,
			`Operation cannot be fulfilled on machines.cluster.x-k8s.io "m1": the object has been modified; please apply your changes to the latest version and try again`, ""},
		{"webhook denial", clusterv1.BootstrapTemplateCloningFailedV1Beta1Reason,
			`failed to create BootstrapConfig: failed to apply KairosConfig: admission webhook "vkairosconfig.kb.io" denied the request: spec.role: kubeadm is supported only for worker nodes`, verdict.Bootstrap},
		{"admission policy denial", clusterv1.InfrastructureTemplateCloningFailedV1Beta1Reason,
			`failed to create InfraMachine: failed to apply KubevirtMachine: kubevirtmachines.infrastructure.cluster.x-k8s.io "m1" is forbidden: ValidatingAdmissionPolicy 'vm-size' with binding 'vm-size' denied request: too much memory`, verdict.MachineFailed},
		{"object invalid", clusterv1.InfrastructureTemplateCloningFailedV1Beta1Reason,
			`failed to create InfraMachine: failed to apply KubevirtMachine: KubevirtMachine.infrastructure.cluster.x-k8s.io "m1" is invalid: spec.virtualMachineTemplate: Required value`, verdict.MachineFailed},
	} {
		out := evaluate(set(tc.reason, tc.msg))
		if tc.final == "" {
			if out.Terminal != nil || out.Stage != StageBootstrapData {
				t.Errorf("%s: got %+v; want the pool waiting at bootstrap-data", tc.name, out.Terminal)
			}
			if len(out.Suspects) != 1 || out.Suspects[0].Object != "MachineSet/ms-1" || !out.Suspects[0].Since.Equal(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)) { //after
				t.Errorf("%s: suspects %+v; want the MachineSet's, since its condition's transition", tc.name, out.Suspects) //after
			} //after
			continue
		}
		if out.Terminal == nil || out.Terminal.Class != tc.final || out.Stage != StageBootstrapData || !strings.Contains(out.Terminal.Detail, tc.reason) {
			t.Errorf("%s: got %+v; want %s at bootstrap-data", tc.name, out.Terminal, tc.final)
		}
	}
}

// A Kairos worker registers first and gets its providerID patched on afterwards: its Node
// found by address without one waits; a Talos worker's Node under another name, or any Node
// with another providerID, gets none ever.
func TestAKairosNodeWaitsForItsProviderID(t *testing.T) {
	p := testPool(osfamily.Kairos, 1)
	v := joined(p, "m1")
	v.Node.Name, v.Node.Spec.ProviderID = "metal-3f2a", ""
	v.Node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}}
	v.Machine.Status.NodeRef.Name = ""
	s := withTemplate(p, v)
	s.KubeletConfig = kubeletConfig("clusterDNS: [10.95.0.10]\n")
	out := evaluate(s)
	if out.Terminal != nil || out.Stage != StageProviderID || !strings.Contains(out.Detail, "Node metal-3f2a has no providerID yet") {
		t.Fatalf("kairos: %+v %+v", out, out.Terminal)
	}
	if len(out.Suspects) != 1 || out.Suspects[0].Class != verdict.Identity || out.Suspects[0].Object != "Node/metal-3f2a" { //after
		t.Fatalf("kairos: suspects %+v", out.Suspects) //after
	} //after
	v.Node.Spec.ProviderID = tenant.ProviderID("m1")
	v.Machine.Status.NodeRef.Name = "metal-3f2a"
	if out := evaluate(s); !out.Done {
		t.Fatalf("kairos, patched: %+v", out)
	}
	v.Node.Spec.ProviderID = tenant.ProviderID("m0")
	if out := evaluate(s); out.Terminal == nil || out.Terminal.Class != verdict.Identity {
		t.Fatalf("kairos, another providerID: %+v", out)
	}
	p = testPool(osfamily.Talos, 1)
	v = joined(p, "m1")
	v.Node.Name, v.Node.Spec.ProviderID = "talos-abc-def", ""
	if out := evaluate(withTemplate(p, v)); out.Terminal == nil || out.Terminal.Class != verdict.Identity || out.Terminal.Stage != StageProviderID {
		t.Fatalf("talos: %+v", out)
	}
}
