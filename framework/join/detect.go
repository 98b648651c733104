package join

//lint:file-ignore SA1019 CAPK v0.1.10 reports a failed KubevirtMachine through the v1beta1 failureReason and failureMessage Cluster API still copies to the Machine, and MachineSets keep their v1beta1 conditions.

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// terminal is a state a detector judged final: the join cannot finish.
type terminal struct {
	Class  verdict.Class
	Stage  Stage
	Detail string
}

// registryRefusal matches what CDI's importer says when the registry will never serve the
// image (registryRefusalPattern).
var registryRefusal = regexp.MustCompile(registryRefusalPattern)

// transientTaints are the taints a Node carries while it starts; they go away on their own.
var transientTaints = map[string]bool{
	corev1.TaintNodeNotReady:             true,
	corev1.TaintNodeUnreachable:          true,
	corev1.TaintNodeNetworkUnavailable:   true,
	taintCloudProviderUninitialized:      true,
	clusterv1.NodeUninitializedTaint.Key: true,
	taintCiliumAgentNotReady:             true,
}

// machineFailure is Cluster API's verdict on a Machine, if it gave up on it.
func machineFailure(m *clusterv1.Machine, at Stage) *terminal {
	reason, msg := "", ""
	if d := m.Status.Deprecated; d != nil && d.V1Beta1 != nil {
		if d.V1Beta1.FailureReason != nil {
			reason = string(*d.V1Beta1.FailureReason)
		}
		if d.V1Beta1.FailureMessage != nil {
			msg = *d.V1Beta1.FailureMessage
		}
	}
	// Cluster API v1.13 copies an infrastructure or bootstrap provider's failureReason and
	// failureMessage into the Machine's deprecated v1beta1 status
	// (internal/controllers/machine/machine_controller_phases.go:55-80); it never sets the
	// Failed phase.
	if reason == "" && msg == "" {
		return nil
	}
	return &terminal{Class: verdict.MachineFailed, Stage: at,
		Detail: fmt.Sprintf("Machine %s failed: %s", m.Name, strings.TrimSpace(reason+" "+msg))}
}

// dataSecretFailure is a bootstrap provider's refusal to generate bootstrap data as the
// condition says it: DataSecretAvailable=False with reason DataSecretGenerationFailed
// (siderolabs/cluster-api-bootstrap-provider-talos v0.6.12 controllers/talosconfig_controller.go:265,
// api/v1alpha3/conditions.go:19,31; CABPT never sets failureReason).
func dataSecretFailure(u *unstructured.Unstructured) (string, bool) {
	if u == nil {
		return "", false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m == nil || m["type"] != conditionDataSecretAvailable || m["status"] != "False" || m["reason"] != reasonDataSecretGenerationFailed {
			continue
		}
		msg, _ := m["message"].(string)
		return strings.TrimSpace(reasonDataSecretGenerationFailed + ": " + msg), true
	}
	return "", false
}

// providerFailure is the infrastructure or bootstrap provider's failureReason/failureMessage
// (both still write them at the v1beta1 contract).
func providerFailure(u *unstructured.Unstructured) (string, bool) {
	if u == nil {
		return "", false
	}
	reason, _, _ := unstructured.NestedString(u.Object, "status", "failureReason")
	msg, _, _ := unstructured.NestedString(u.Object, "status", "failureMessage")
	if reason == "" && msg == "" {
		return "", false
	}
	return strings.TrimSpace(reason + ": " + msg), true
}

// diskFailure judges a DataVolume and its importer Pod, ending the wait only on what CDI v1.64.0
// never leaves or no retry of it changes:
//   - phase Failed: CDI stops working on a DataVolume once Failed (or Succeeded)
//     (pkg/controller/datavolume/controller-base.go lines 824-828);
//   - a claim CDI refuses to render (reason ErrClaimNotValid on the Bound condition: no access
//     mode in the class's StorageProfile, no such class, an archive on a block volume;
//     controller-base.go lines 517-523 and 884-890, util.go lines 186-211, 409-424): CDI retries
//     the same spec against the same profile, and only a person changing either changes it;
//   - a registry or web server refusing the source (401, 403, 404: registryRefusalPattern), in
//     the importer's termination message or the Running condition CDI copies it to: CDI restarts
//     the importer without end (restartPolicy OnFailure, import-controller.go line 958, no retry
//     limit in pkg/controller/import-controller.go), and the same credentials get the same answer.
//
// Restarts for any other reason, an OOM-killed importer (CDI deletes it and starts another with
// direct I/O, import-controller.go lines 393-398, 463-473) and a stalled import are not final:
// importerDetail shows them as suspects in the stage detail, so a deadline failure names them.
func diskFailure(dv *cdiv1.DataVolume, importer *corev1.Pod) *terminal {
	if dv == nil {
		return nil
	}
	say := func(format string, a ...any) *terminal {
		return &terminal{Class: verdict.DiskImport, Stage: StageDiskImport,
			Detail: fmt.Sprintf("DataVolume %s: ", dv.Name) + fmt.Sprintf(format, a...)}
	}
	if dv.Status.Phase == cdiv1.Failed {
		return say("Failed: %s", orWord(dvMessages(dv), "no condition message"))
	}
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeBound && c.Status != corev1.ConditionTrue && c.Reason == reasonErrClaimNotValid {
			return say("CDI refuses its claim: %s: %s", c.Reason, c.Message)
		}
		if c.Type == cdiv1.DataVolumeRunning && c.Status != corev1.ConditionTrue && registryRefusal.MatchString(c.Message) {
			return say("importer refused by the registry: %s: %s", c.Reason, c.Message)
		}
	}
	if importer == nil {
		return nil
	}
	for _, cs := range importer.Status.ContainerStatuses {
		msg := ""
		if t := cs.LastTerminationState.Terminated; t != nil {
			msg = t.Message
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			msg = t.Message
		}
		if msg != "" && registryRefusal.MatchString(msg) {
			return say("importer %s refused by the registry (restarts: %d): %s", importer.Name, cs.RestartCount, firstLine(msg))
		}
	}
	return nil
}

// taintFailure is a Ready Node's NoSchedule or NoExecute taint that is not a known startup one.
func taintFailure(n *corev1.Node) *terminal {
	for _, t := range n.Spec.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !transientTaints[t.Key] {
			return &terminal{Class: verdict.NotSchedulable, Stage: StageSchedulable,
				Detail: fmt.Sprintf("Node %s is Ready but tainted %s=%s:%s, which is not a startup taint; no workload without a toleration lands there",
					n.Name, t.Key, t.Value, t.Effect)}
		}
	}
	return nil
}

func dvMessages(dv *cdiv1.DataVolume) string {
	var parts []string
	for _, c := range dv.Status.Conditions {
		if c.Message != "" {
			parts = append(parts, string(c.Type)+" "+c.Reason+": "+c.Message)
		}
	}
	return strings.Join(parts, "; ")
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func orWord(s, word string) string {
	if strings.TrimSpace(s) == "" {
		return word
	}
	return s
}

// machineSetFailure is a MachineSet that cannot create its Machines: Cluster API v1.13 marks its
// deprecated v1beta1 condition MachinesCreated False when cloning the bootstrap or
// infrastructure template, or creating the Machine, fails (internal/controllers/machineset/
// machineset_controller.go:851-906); the v1beta2 conditions keep saying ScalingUp, and there is
// no event. A provider's admission webhook refusing the clone (the Kairos provider's on
// KairosConfigs, failurePolicy Fail) shows only here.
func machineSetFailure(sets []clusterv1.MachineSet) *terminal {
	for _, ms := range sets {
		d := ms.Status.Deprecated
		if ms.DeletionTimestamp != nil || d == nil || d.V1Beta1 == nil {
			continue
		}
		for _, c := range d.V1Beta1.Conditions {
			if c.Type != clusterv1.MachinesCreatedV1Beta1Condition || c.Status != corev1.ConditionFalse {
				continue
			}
			class := verdict.MachineFailed
			switch c.Reason {
			case clusterv1.BootstrapTemplateCloningFailedV1Beta1Reason:
				class = verdict.Bootstrap
			case clusterv1.InfrastructureTemplateCloningFailedV1Beta1Reason, clusterv1.MachineCreationFailedV1Beta1Reason:
			default:
				continue // a preflight check (version skew, a control plane upgrading) passes with time
			}
			return &terminal{Class: class, Stage: StageBootstrapData,
				Detail: fmt.Sprintf("MachineSet %s cannot create its Machines: MachinesCreated=False %s: %s", ms.Name, c.Reason, c.Message)}
		}
	}
	return nil
}
