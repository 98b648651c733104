package tenant

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A condition is read by its type from status.conditions, its message trimmed; an absent
// object or condition reads as "", described as "no <type>"; Flux's observedGeneration is read
// from the condition itself.
func TestConditionsAreReadByType(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "InstallFailed", "message": " chart refused \n", "observedGeneration": int64(3)},
		map[string]any{"type": "HealthCheckSucceeded", "status": "True"},
	}}}}
	if s, r, m := Condition(obj, "Ready"); s != "False" || r != "InstallFailed" || m != "chart refused" {
		t.Errorf("Ready: %q %q %q", s, r, m)
	}
	for _, c := range []struct {
		obj       *unstructured.Unstructured
		typ, want string
	}{
		{obj, "Ready", "Ready=False InstallFailed: chart refused"},
		{obj, "HealthCheckSucceeded", "HealthCheckSucceeded=True"},
		{obj, "Stalled", "no Stalled"},
		{nil, "Ready", "no Ready"},
	} {
		if got := DescribeCondition(c.obj, c.typ); got != c.want {
			t.Errorf("DescribeCondition(%s) = %q, want %q", c.typ, got, c.want)
		}
	}
	if g := conditionGeneration(obj, "Ready"); g != 3 {
		t.Errorf("observedGeneration %d, want 3", g)
	}
	if g := conditionGeneration(obj, "Stalled"); g != 0 {
		t.Errorf("observedGeneration of an absent condition %d, want 0", g)
	}
	if d := condDetail(obj); d != "Ready=False InstallFailed chart refused" {
		t.Errorf("condDetail = %q", d)
	}
	if d := condDetail(nil); d != "not created yet" {
		t.Errorf("condDetail(nil) = %q", d)
	}
}
