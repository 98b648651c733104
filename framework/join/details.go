package join

import (
	"fmt"
	"sort"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// The words of a pool's detail: what each object says about where it stands.

// missingAnnotations lists the Cluster API annotations the Node does not carry yet.
func missingAnnotations(p followed, m *clusterv1.Machine, n *corev1.Node) string {
	var miss []string
	for k := range wantAnnotations(p, m) {
		if _, ok := n.Annotations[k]; !ok {
			miss = append(miss, k)
		}
	}
	sort.Strings(miss)
	return strings.Join(miss, ", ")
}

// wrongAnnotations lists the Cluster API annotations the Node carries with another value.
func wrongAnnotations(p followed, m *clusterv1.Machine, n *corev1.Node) string {
	var wrong []string
	for k, want := range wantAnnotations(p, m) {
		if got, ok := n.Annotations[k]; ok && got != want {
			wrong = append(wrong, fmt.Sprintf("%s=%q, want %q", k, got, want))
		}
	}
	sort.Strings(wrong)
	return strings.Join(wrong, ", ")
}

func wantAnnotations(p followed, m *clusterv1.Machine) map[string]string {
	return map[string]string{
		tenant.AnnotationClusterName:      p.Names.Cluster(),
		tenant.AnnotationClusterNamespace: p.Names.Namespace,
		tenant.AnnotationMachine:          m.Name,
	}
}

func nodeReady(n *corev1.Node) (bool, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, fmt.Sprintf("Ready=%s %s %s", c.Status, c.Reason, c.Message)
		}
	}
	return false, "no Ready condition yet"
}

func unschedulable(n *corev1.Node) string {
	if n.Spec.Unschedulable {
		return "cordoned (spec.unschedulable)"
	}
	for _, t := range n.Spec.Taints {
		if _, ok := pressureTaints[t.Key]; ok && t.Effect == corev1.TaintEffectNoSchedule {
			return fmt.Sprintf("pressure taint %s:%s on until its condition clears", t.Key, t.Effect)
		}
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return fmt.Sprintf("startup taint %s:%s still on", t.Key, t.Effect)
		}
	}
	return ""
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return "unknown"
}

func conditionsOf(u *unstructured.Unstructured) string {
	if u == nil {
		return "not created yet"
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var parts []string
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if cm == nil || cm["status"] == "True" {
			continue
		}
		parts = append(parts, strings.TrimSpace(fmt.Sprintf("%v=%v %v %v", cm["type"], cm["status"], orNil(cm["reason"]), orNil(cm["message"]))))
	}
	if len(parts) == 0 {
		return "no condition says why"
	}
	return strings.Join(parts, "; ")
}

func orNil(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func importerDetail(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	restarts, last := importerExits(p)
	if last == "" {
		return fmt.Sprintf(" (importer %s %s, restarts: %d)", p.Name, p.Status.Phase, restarts)
	}
	return fmt.Sprintf(" (importer %s %s, restarts: %d, %s)", p.Name, p.Status.Phase, restarts, last)
}

// importerExits are an importer Pod's container restarts and its last exit, if it exited.
func importerExits(p *corev1.Pod) (int32, string) {
	restarts := int32(0)
	last := ""
	for _, cs := range p.Status.ContainerStatuses {
		restarts += cs.RestartCount
		if t := cs.LastTerminationState.Terminated; t != nil {
			last = exitDetail(t)
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			last = exitDetail(t)
		}
	}
	return restarts, last
}

// exitDetail is a container's exit as the kubelet reports it: code, reason, first line of its
// termination message.
func exitDetail(t *corev1.ContainerStateTerminated) string {
	s := fmt.Sprintf("last exit %d %s", t.ExitCode, t.Reason)
	if m := firstLine(t.Message); m != "" {
		s += ": " + m
	}
	return s
}

func launcherDetail(p, temporary *corev1.Pod) string {
	what := "launcher"
	if p == nil && temporary != nil {
		// KubeVirt's temporary launcher binds a volume that waits for its first consumer.
		p, what = temporary, "temporary launcher (binding its volume)"
	}
	if p == nil {
		return "; no launcher Pod yet"
	}
	d := fmt.Sprintf("; %s %s %s", what, p.Name, p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			d += fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
		}
	}
	return d + podWaiting(p)
}

func podWaiting(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return fmt.Sprintf(" (%s: %s %s)", cs.Name, w.Reason, w.Message)
		}
	}
	return ""
}

func consoleErr(c *consoleState) string {
	if c == nil {
		return " (console not read yet)"
	}
	if c.Err != "" {
		return " (" + c.Err + ")"
	}
	return ""
}

// booted says how the harness knows the guest booted: its console, or (the console taken by
// another client) nothing but the VMI running.
func booted(v *machineView) string {
	c := v.Console
	switch {
	case c != nil && c.Lost != "" && c.Lines == 0:
		return fmt.Sprintf("runs (its console was taken at %s before the guest printed anything; the boot is not seen)", c.LostAt.UTC().Format(time.TimeOnly))
	case c != nil && c.Lost != "":
		return fmt.Sprintf("booted (its console was taken at %s; the harness reads it no more)", c.LostAt.UTC().Format(time.TimeOnly))
	}
	return "booted"
}

func lastLine(c *consoleState) string {
	if c == nil || c.Last == "" {
		return ""
	}
	return fmt.Sprintf("; console: %q", strings.TrimSpace(c.Last))
}

// csrDetail names the newest kubelet CSR of the Machine's Node and how long it has stood in its
// state: a kubelet the tenant refused leaves a CSR Pending, or none at all (nothing in this stack
// denies one; kube-controller-manager's approver only approves).
func csrDetail(csrs []certificatesv1.CertificateSigningRequest) string {
	if len(csrs) == 0 {
		return "; no kubelet CSR in the tenant"
	}
	newest := csrs[0]
	for _, c := range csrs[1:] {
		if c.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = c
		}
	}
	state := "Pending"
	for _, c := range newest.Status.Conditions {
		if c.Status == corev1.ConditionTrue || c.Status == "" {
			state = string(c.Type)
		}
	}
	return fmt.Sprintf("; tenant CSR %s of %s %s since %s", newest.Name, newest.Spec.Username, state,
		newest.CreationTimestamp.UTC().Format(time.TimeOnly))
}

// lastWarning is the latest Warning event about pod p among events, as "; last warning <reason>:
// <message>" ("": none). The kubelet says why it cannot make a pod's sandbox only in such an event
// (FailedCreatePodSandBox: k8s.io/kubernetes v1.35.6 pkg/kubelet/kuberuntime/kuberuntime_manager.go
// line 1573, pkg/kubelet/events/event.go line 81): the pod's own status says ContainerCreating.
// The kubelet tries again on its next sync, so the event is evidence for the stage's detail, never
// a class.
func lastWarning(p *corev1.Pod, events []corev1.Event) string {
	var last *corev1.Event
	for i := range events {
		e := &events[i]
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.UID != p.UID {
			continue
		}
		if last == nil || !EventTime(e).Before(EventTime(last)) {
			last = e
		}
	}
	if last == nil {
		return ""
	}
	msg := last.Message
	if len(msg) > maxWarning {
		msg = msg[:maxWarning] + "…"
	}
	return "; last warning " + last.Reason + ": " + msg
}

// EventTime is when event e last happened, from whichever clock its reporter filled in: a
// series' last observation, the last timestamp (core/v1 events), the event time (events.k8s.io
// reporters), the first timestamp, or else its creation.
func EventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// maxWarning bounds the message lastWarning quotes.
const maxWarning = 400
