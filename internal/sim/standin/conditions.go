package standin

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Condition is a Cluster API v1beta1-style condition (status.conditions of v1beta1-contract
// providers: CAPK, the Talos and Kairos bootstrap providers).
type Condition struct {
	Type     string
	Status   string // "True", "False", "Unknown"
	Severity string // "Error", "Warning", "Info" when Status is False
	Reason   string
	Message  string
}

// True is a condition of type t with status True.
func True(t string) Condition { return Condition{Type: t, Status: "True"} }

// False is a condition of type t with status False.
func False(t, severity, reason, message string) Condition {
	return Condition{Type: t, Status: "False", Severity: severity, Reason: reason, Message: message}
}

// SetConditions writes cs into obj's status.conditions, keeping each condition's
// lastTransitionTime when its status did not change, and sorted with Ready first as Cluster
// API does.
func SetConditions(obj *unstructured.Unstructured, now time.Time, cs ...Condition) {
	existing, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	byType := map[string]map[string]any{}
	var order []string
	for _, e := range existing {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		if _, seen := byType[t]; !seen {
			order = append(order, t)
		}
		byType[t] = m
	}
	stamp := metav1.NewTime(now).UTC().Format(time.RFC3339)
	for _, c := range cs {
		m := map[string]any{"type": c.Type, "status": c.Status, "lastTransitionTime": stamp}
		if old, ok := byType[c.Type]; ok {
			if old["status"] == c.Status {
				m["lastTransitionTime"] = old["lastTransitionTime"]
			}
		} else {
			order = append(order, c.Type)
		}
		for k, v := range map[string]string{"severity": c.Severity, "reason": c.Reason, "message": c.Message} {
			if v != "" {
				m[k] = v
			}
		}
		byType[c.Type] = m
	}
	out := make([]any, 0, len(order))
	if r, ok := byType["Ready"]; ok {
		out = append(out, r)
	}
	for _, t := range order {
		if t != "Ready" {
			out = append(out, byType[t])
		}
	}
	_ = unstructured.SetNestedSlice(obj.Object, out, "status", "conditions")
}
