package hostnames

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A worker is found by its hostname when the selector on it finds that Node alone.
func TestSelectedNamesWhatTheSelectorFound(t *testing.T) {
	w1 := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{corev1.LabelHostname: "w1"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "w1"}}}}
	w2 := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w2"}}
	if got := Selected(&w1, []corev1.Node{w1}); got != "" {
		t.Errorf("found alone: %q", got)
	}
	if got := Selected(&w2, nil); !strings.HasPrefix(got, "no Node has kubernetes.io/hostname=w2: Node w2 is not found by its hostname") {
		t.Errorf("found by none: %q", got)
	}
	if got := Selected(&w1, []corev1.Node{w1, w2}); got != "kubernetes.io/hostname=w1 selects w1, w2, not Node w1 alone" {
		t.Errorf("found with another: %q", got)
	}
	if Hostname(&w2) != "w2" || Ready(&w2) {
		t.Error("a Node without a Hostname address is named by its name; without a Ready condition it is not Ready")
	}
}
