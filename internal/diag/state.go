package diag

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Condition is one condition of an object as the timeline records it.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Since is the condition's own lastTransitionTime, when it has one.
	Since string `json:"since,omitempty"`
}

// Change is one line of a timeline: what changed on one object, and when the harness saw it.
type Change struct {
	At        time.Time `json:"at"`
	Cluster   string    `json:"cluster"`
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	// UID tells an object from the one that replaced it under the same or another name.
	UID string `json:"uid,omitempty"`
	// Change is added, changed or deleted.
	Change string `json:"change"`
	Phase  string `json:"phase,omitempty"`
	// Fields are the tracked fields that changed (all of them when added): replicas, nodeRef,
	// providerID, progress, container states, taints...
	Fields map[string]string `json:"fields,omitempty"`
	// Conditions are the conditions that changed (all of them when added).
	Conditions []Condition `json:"conditions,omitempty"`
}

// objState is what the timeline compares between two versions of an object.
type objState struct {
	phase  string
	fields map[string]string
	conds  map[string]Condition
}

// trackedFields are read from every kind; a path an object lacks is skipped.
var trackedFields = []struct{ name, path string }{
	{"progress", "status.progress"},
	{"ready", "status.ready"},
	{"replicas", "status.replicas"},
	{"readyReplicas", "status.readyReplicas"},
	{"availableReplicas", "status.availableReplicas"},
	{"nodeRef", "status.nodeRef.name"},
	{"providerID", "spec.providerID"},
	{"failureReason", "status.failureReason"},
	{"failureMessage", "status.failureMessage"},
	{"dataSecretName", "status.dataSecretName"},
	{"printableStatus", "status.printableStatus"},
	{"nodeName", "status.nodeName"},
	{"restartCount", "status.restartCount"},
	{"infrastructureProvisioned", "status.initialization.infrastructureProvisioned"},
	{"bootstrapDataSecretCreated", "status.initialization.bootstrapDataSecretCreated"},
	{"dataSecretCreated", "status.initialization.dataSecretCreated"},
	{"provisioned", "status.initialization.provisioned"},
	{"controlPlaneInitialized", "status.initialization.controlPlaneInitialized"},
	{"unschedulable", "spec.unschedulable"},
	{"kubeletVersion", "status.nodeInfo.kubeletVersion"},
	{"version", "status.version"},
	{"currentHealthy", "status.currentHealthy"},
	{"expectedMachines", "status.expectedMachines"},
	{"remediationsAllowed", "status.remediationsAllowed"},
	{"kubernetesResources", "status.kubernetesResources.version.status"},
}

func stateOf(u *unstructured.Unstructured) objState {
	s := objState{fields: map[string]string{}, conds: map[string]Condition{}}
	s.phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	for _, f := range trackedFields {
		v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, strings.Split(f.path, ".")...)
		if ok && v != nil {
			s.fields[f.name] = fmt.Sprint(v)
		}
	}
	if ts := u.GetDeletionTimestamp(); ts != nil {
		s.fields["deleting"] = stamp(ts.Time)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		cond := Condition{Type: str(m["type"]), Status: str(m["status"]), Reason: str(m["reason"]),
			Message: str(m["message"]), Since: str(m["lastTransitionTime"])}
		if cond.Type != "" {
			s.conds[cond.Type] = cond
		}
	}
	switch u.GetKind() {
	case "Pod":
		podFields(u, s.fields)
	case "Node":
		taints, _, _ := unstructured.NestedSlice(u.Object, "spec", "taints")
		var ts []string
		for _, t := range taints {
			if m, ok := t.(map[string]any); ok {
				ts = append(ts, fmt.Sprintf("%s=%s:%s", str(m["key"]), str(m["value"]), str(m["effect"])))
			}
		}
		if len(ts) > 0 {
			s.fields["taints"] = strings.Join(ts, ",")
		}
	}
	return s
}

// podFields records each container's state, restarts and readiness, and where the Pod runs.
func podFields(u *unstructured.Unstructured, fields map[string]string) {
	if n, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName"); n != "" {
		fields["node"] = n
	}
	for _, key := range []string{"initContainerStatuses", "containerStatuses"} {
		list, _, _ := unstructured.NestedSlice(u.Object, "status", key)
		for _, c := range list {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			fields["container "+str(m["name"])] = containerState(m)
		}
	}
}

func containerState(m map[string]any) string {
	state, _ := m["state"].(map[string]any)
	desc := "unknown"
	for _, k := range []string{"running", "waiting", "terminated"} {
		if v, ok := state[k].(map[string]any); ok {
			desc = k
			if r := str(v["reason"]); r != "" {
				desc += " " + r
			}
			if code, ok := v["exitCode"]; ok {
				desc += fmt.Sprintf(" exit %v", code)
			}
		}
	}
	return fmt.Sprintf("%s restarts=%v ready=%v", desc, m["restartCount"], m["ready"])
}

func str(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// diff is the change from prev to cur; ok is false when nothing the timeline tracks changed.
func diff(prev *objState, cur objState) (phase string, fields map[string]string, conds []Condition, ok bool) {
	if prev == nil {
		for _, c := range cur.conds {
			conds = append(conds, c)
		}
		sortConds(conds)
		return cur.phase, cur.fields, conds, true
	}
	if cur.phase != prev.phase {
		phase, ok = cur.phase, true
	}
	fields = map[string]string{}
	for k, v := range cur.fields {
		if prev.fields[k] != v {
			fields[k], ok = v, true
		}
	}
	for k := range prev.fields {
		if _, still := cur.fields[k]; !still {
			fields[k], ok = "", true
		}
	}
	for t, c := range cur.conds {
		p, had := prev.conds[t]
		if !had || p.Status != c.Status || p.Reason != c.Reason || p.Message != c.Message {
			conds, ok = append(conds, c), true
		}
	}
	sortConds(conds)
	if len(fields) == 0 {
		fields = nil
	}
	return phase, fields, conds, ok
}

func sortConds(c []Condition) { sort.Slice(c, func(i, j int) bool { return c[i].Type < c[j].Type }) }
