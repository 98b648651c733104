package tenant

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// conditionOf is condition t in obj's status.conditions as written, nil when obj or the
// condition is absent.
func conditionOf(obj *unstructured.Unstructured, t string) map[string]any {
	if obj == nil {
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m != nil && m["type"] == t {
			return m
		}
	}
	return nil
}

// Condition is the status, reason and message of condition t in obj's status.conditions
// (metav1.Condition as Cluster API v1beta2, Flux and core kinds write them); all "" when absent.
func Condition(obj *unstructured.Unstructured, t string) (status, reason, message string) {
	m := conditionOf(obj, t)
	status, _ = m["status"].(string)
	reason, _ = m["reason"].(string)
	message, _ = m["message"].(string)
	return status, reason, strings.TrimSpace(message)
}

// DescribeCondition is condition t of obj in words: "t=Status Reason: message", or "no t" when
// absent.
func DescribeCondition(obj *unstructured.Unstructured, t string) string {
	s, r, m := Condition(obj, t)
	if s == "" {
		return "no " + t
	}
	out := t + "=" + s
	if r != "" {
		out += " " + r
	}
	if m != "" {
		out += ": " + m
	}
	return out
}

// conditionGeneration is condition t's observedGeneration (Flux sets it on its conditions); 0
// when absent.
func conditionGeneration(obj *unstructured.Unstructured, t string) int64 {
	g, _ := conditionOf(obj, t)["observedGeneration"].(int64)
	return g
}

// condDetail is obj's Ready condition as a wait shows it: "Ready=Status Reason message".
func condDetail(obj *unstructured.Unstructured) string {
	if obj == nil {
		return "not created yet"
	}
	s, r, m := Condition(obj, "Ready")
	if s == "" {
		return "no Ready condition yet"
	}
	return strings.TrimSpace(fmt.Sprintf("Ready=%s %s %s", s, r, m))
}
