package join

//lint:file-ignore SA1019 CAPK v0.1.10 reports a failed KubevirtMachine through the v1beta1 failureReason and failureMessage Cluster API still copies to the Machine, and MachineSets keep their v1beta1 conditions.

import (
	"fmt"
	"regexp"
	"strings"
	"time"

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

// machineFailure is a Machine's v1beta1 failureReason and failureMessage, as a suspect at most.
// Cluster API v1.13 copies a provider's failureReason onto the Machine and never clears it
// there (sigs.k8s.io/cluster-api v1.13.6 internal/controllers/machine/machine_controller_phases.go:55-80:
// set when the provider's is set, never unset), never sets the Failed phase, and its
// MachineHealthCheck does not read it (internal/controllers/machinehealthcheck/
// machinehealthcheck_targets.go:80-200 judges conditions, the Node and the startup timeout).
// A copy says "Failure detected from referenced resource <kind> with name <name>" (:77-79): the
// provider's own object is then the truth, and its detector judges it. Any other failure is
// Cluster API's own (InvalidConfiguration when a provisioned Machine's infrastructure object
// is gone, :263-271): a suspect too, since a health check may replace the Machine.
func machineFailure(m *clusterv1.Machine, at Stage) *Suspect {
	reason, msg := "", ""
	if d := m.Status.Deprecated; d != nil && d.V1Beta1 != nil {
		if d.V1Beta1.FailureReason != nil {
			reason = string(*d.V1Beta1.FailureReason)
		}
		if d.V1Beta1.FailureMessage != nil {
			msg = *d.V1Beta1.FailureMessage
		}
	}
	if (reason == "" && msg == "") || strings.HasPrefix(msg, copiedFailurePrefix) {
		return nil
	}
	return &Suspect{Class: verdict.MachineFailed, Stage: at, Object: "Machine/" + m.Name,
		Detail: fmt.Sprintf("Machine %s carries failureReason %s (Cluster API never clears it on the Machine, and its MachineHealthCheck does not act on it)",
			m.Name, strings.TrimSpace(reason+": "+msg))}
}

// dataSecretFailure is a bootstrap provider's failure to generate bootstrap data as the
// condition says it: DataSecretAvailable=False with reason DataSecretGenerationFailed
// (siderolabs/cluster-api-bootstrap-provider-talos v0.6.12 controllers/talosconfig_controller.go:265,
// api/v1alpha3/conditions.go:19,31; CABPT never sets failureReason). A suspect: CABPT returns the
// error from its reconcile (:265-267), so controller-runtime tries again with its backoff.
func dataSecretFailure(u *unstructured.Unstructured) *Suspect {
	if u == nil {
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m == nil || m["type"] != conditionDataSecretAvailable || m["status"] != "False" || m["reason"] != reasonDataSecretGenerationFailed {
			continue
		}
		msg, _ := m["message"].(string)
		return &Suspect{Class: verdict.Bootstrap, Stage: StageBootstrapData, Object: u.GetKind() + "/" + u.GetName(), Since: transitionOf(m),
			Detail: fmt.Sprintf("%s %s: %s (its provider tries again)", u.GetKind(), u.GetName(),
				strings.TrimSpace(reasonDataSecretGenerationFailed+": "+msg))}
	}
	return nil
}

// providerFailure is an infrastructure or bootstrap provider's failureReason and failureMessage
// (both still write them at the v1beta1 contract), as a suspect at stage at. Neither is final:
// the Kairos provider sets it on any error of a reconcile and clears it on the next success;
// its API calls a non-empty value "an ongoing failure, not a terminal one"
// (kairos-io/cluster-api-provider-kairos main c300236 api/bootstrap/v1beta2/kairosconfig_types.go:516-521,
// internal/controllers/bootstrap/kairosconfig_controller.go:210-216, cleared :231-236). CAPK sets
// it when the VM is evicted by a drain, marked terminal by a label, or done under runStrategy
// Halted or Once, and never clears it (cluster-api-provider-kubevirt v0.1.10
// controllers/kubevirtmachine_controller.go:254-262, pkg/kubevirt/machine.go:116-172); under the
// chart's runStrategy Always KubeVirt starts the VM again, and the VM's own status says whether
// it runs.
func providerFailure(u *unstructured.Unstructured, class verdict.Class, at Stage, why string) *Suspect {
	if u == nil {
		return nil
	}
	reason, _, _ := unstructured.NestedString(u.Object, "status", "failureReason")
	msg, _, _ := unstructured.NestedString(u.Object, "status", "failureMessage")
	if reason == "" && msg == "" {
		return nil
	}
	return &Suspect{Class: class, Stage: at, Object: u.GetKind() + "/" + u.GetName(),
		Detail: fmt.Sprintf("%s %s reports failureReason %s (%s)", u.GetKind(), u.GetName(), strings.TrimSpace(reason+": "+msg), why)}
}

// transitionOf is a condition's lastTransitionTime (zero when it has none that parses).
func transitionOf(c map[string]any) time.Time {
	s, _ := c["lastTransitionTime"].(string)
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// diskFailure judges a DataVolume and its importer Pod, ending the wait only on what no retry
// of CDI v1.64.0 changes: a registry or web server refusing the source (401, 403, 404:
// registryRefusalPattern), in the importer's termination message or the Running condition CDI
// copies it to. CDI restarts the importer without end (restartPolicy OnFailure,
// import-controller.go line 958, no retry limit in pkg/controller/import-controller.go), and the
// same credentials get the same answer.
//
// Everything else is a suspect (diskSuspect, importerSuspect): a phase Failed, a claim CDI
// does not render yet (ErrClaimNotValid), restarts for any other reason, an OOM-killed importer
// (CDI deletes it and starts another with direct I/O, import-controller.go lines 393-398,
// 463-473) and a stalled import; a deadline failure names them.
func diskFailure(dv *cdiv1.DataVolume, importer *corev1.Pod) *terminal {
	if dv == nil {
		return nil
	}
	say := func(format string, a ...any) *terminal {
		return &terminal{Class: verdict.DiskImport, Stage: StageDiskImport,
			Detail: fmt.Sprintf("DataVolume %s: ", dv.Name) + fmt.Sprintf(format, a...)}
	}
	for _, c := range dv.Status.Conditions {
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

// diskSuspect is a DataVolume state CDI v1.64.0 still moves on from, as a suspect that quotes
// CDI:
//   - phase Failed: CDI recomputes the phase from the claim on every reconcile and sets Failed
//     only while the claim is Lost (pkg/controller/datavolume/controller-base.go:895-983,
//     :959-963); a claim bound again moves it on, and only progress polling stops (:824-828);
//   - reason ErrClaimNotValid on the Bound condition: CDI renders no claim from the spec and
//     the class's StorageProfile yet (:517-529, util.go:180-211, 404-424), and reconciles the
//     DataVolume again whenever a StorageClass, a StorageProfile or an available
//     PersistentVolume changes (:314-362). Whether the profile will ever offer an access mode
//     is decided by its spec, which a person or the platform writes, not by anything the join
//     reads; the components phase judges the profiles of the harness's own classes
//     (install.StorageProfilesAccept).
func diskSuspect(dv *cdiv1.DataVolume) *Suspect {
	if dv == nil {
		return nil
	}
	s := &Suspect{Class: verdict.DiskImport, Stage: StageDiskImport, Object: "DataVolume/" + dv.Name}
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeBound && c.Status != corev1.ConditionTrue && c.Reason == reasonErrClaimNotValid {
			s.Since = c.LastTransitionTime.Time
			s.Detail = fmt.Sprintf("DataVolume %s: CDI renders no claim yet: %s: %s (CDI tries again when a StorageClass, a StorageProfile or an available PersistentVolume changes)",
				dv.Name, c.Reason, c.Message)
			return s
		}
	}
	if dv.Status.Phase == cdiv1.Failed {
		s.Detail = fmt.Sprintf("DataVolume %s Failed: %s (CDI recomputes the phase from its claim on every reconcile)", dv.Name, orWord(dvMessages(dv), "no condition message"))
		return s
	}
	return nil
}

// pressureTaints are the NoSchedule taints Kubernetes' node lifecycle controller puts on a Node
// while a condition of it holds and takes off when it clears, on every pass over the Node
// (k8s.io/kubernetes v1.35.4 pkg/controller/nodelifecycle/node_lifecycle_controller.go:87-113
// (nodeConditionToTaintKeyStatusMap), the maps; :540-590 (doNoScheduleTaintingPass)): a Node
// under pressure now may be free of it in a minute, so such a taint is a suspect, named with
// the condition that holds it.
var pressureTaints = map[string]corev1.NodeConditionType{
	corev1.TaintNodeMemoryPressure: corev1.NodeMemoryPressure,
	corev1.TaintNodeDiskPressure:   corev1.NodeDiskPressure,
	corev1.TaintNodePIDPressure:    corev1.NodePIDPressure,
}

// taintFailure is a Ready Node's NoSchedule or NoExecute taint that is not a known startup one:
// final, unless it is a pressure taint, which is a suspect.
func taintFailure(n *corev1.Node) (*terminal, *Suspect) {
	var pressure *Suspect
	for _, t := range n.Spec.Taints {
		if (t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute) || transientTaints[t.Key] {
			continue
		}
		if cond, ok := pressureTaints[t.Key]; ok && t.Effect == corev1.TaintEffectNoSchedule {
			if pressure == nil {
				pressure = pressureSuspect(n, t, cond)
			}
			continue
		}
		return &terminal{Class: verdict.NotSchedulable, Stage: StageSchedulable,
			Detail: fmt.Sprintf("Node %s is Ready but tainted %s=%s:%s, which is neither a startup taint nor a pressure taint the node lifecycle controller removes; no workload without a toleration lands there",
				n.Name, t.Key, t.Value, t.Effect)}, pressure
	}
	return nil, pressure
}

// pressureSuspect is Node n's pressure taint t and the condition cond that holds it.
func pressureSuspect(n *corev1.Node, t corev1.Taint, cond corev1.NodeConditionType) *Suspect {
	s := &Suspect{Class: verdict.NotSchedulable, Stage: StageSchedulable, Object: "Node/" + n.Name}
	state := fmt.Sprintf("condition %s not reported", cond)
	for _, c := range n.Status.Conditions {
		if c.Type == cond {
			state = strings.TrimSpace(fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
			s.Since = c.LastTransitionTime.Time
		}
	}
	s.Detail = fmt.Sprintf("Node %s is tainted %s:%s (%s); the node lifecycle controller takes the taint off when the condition clears",
		n.Name, t.Key, t.Effect, state)
	return s
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
// infrastructure template, or creating the Machine, fails, with the error as the message
// (sigs.k8s.io/cluster-api v1.13.6 internal/controllers/machineset/machineset_controller.go:851-910);
// the v1beta2 conditions keep saying ScalingUp, and there is no event. It returns the error
// from its reconcile, so controller-runtime tries again with its backoff, and marks the
// condition True once the Machines exist (:1444-1462). Only the API's refusal is final: an
// admission webhook's denial, an admission policy's, or the object found invalid, which the
// same clone meets again on every retry (admissionRefusalPattern). Anything else (a webhook
// that cannot be called, a conflict, a timeout) is a suspect. A provider's admission webhook
// refusing the clone (the Kairos provider's on KairosConfigs, failurePolicy Fail) shows only here.
func machineSetFailure(sets []clusterv1.MachineSet) (*terminal, []Suspect) {
	var out []Suspect
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
			detail := fmt.Sprintf("MachineSet %s cannot create its Machines: MachinesCreated=False %s: %s", ms.Name, c.Reason, c.Message)
			if refusedByTheAPI(c.Message) {
				return &terminal{Class: class, Stage: StageBootstrapData, Detail: detail}, nil
			}
			out = append(out, Suspect{Class: class, Stage: StageBootstrapData, Object: "MachineSet/" + ms.Name, Since: c.LastTransitionTime.Time,
				Detail: detail + " (Cluster API tries again)"})
		}
	}
	return nil, out
}

// admissionRefusal matches the apiserver's refusal of an object (admissionRefusalPattern).
var admissionRefusal = regexp.MustCompile(admissionRefusalPattern)

// refusedByTheAPI reports whether an error message is the apiserver's refusal of the object,
// and not a failure to reach a verdict: a webhook the apiserver could not call fails the
// request with "failed calling webhook" (k8s.io/apiserver v0.35.4 pkg/util/webhook/error.go:36,
// returned as an internal error, pkg/admission/plugin/webhook/validating/dispatcher.go:199-219).
func refusedByTheAPI(msg string) bool {
	return !strings.Contains(msg, webhookCallFailed) && admissionRefusal.MatchString(msg)
}

// importerSuspect is an importer that exited and is being run again (by the kubelet, or by CDI
// in a new Pod) for a reason diskFailure does not hold final: a suspect of class disk-import,
// its last exit quoted, while the import has not succeeded.
func importerSuspect(dv *cdiv1.DataVolume, p *corev1.Pod) *Suspect {
	if p == nil || (dv != nil && dv.Status.Phase == cdiv1.Succeeded) {
		return nil
	}
	restarts, last := importerExits(p)
	if last == "" {
		return nil
	}
	return &Suspect{Class: verdict.DiskImport, Stage: StageDiskImport, Object: "Pod/" + p.Name,
		Detail: fmt.Sprintf("importer %s %s, restarts: %d, %s; CDI and the kubelet run it again", p.Name, p.Status.Phase, restarts, last)}
}
