package testbed

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Selected are the objects of objs whose labels match sel.
func Selected(objs []*unstructured.Unstructured, sel map[string]string) []*unstructured.Unstructured {
	s := labels.SelectorFromSet(sel)
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if s.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	return out
}
