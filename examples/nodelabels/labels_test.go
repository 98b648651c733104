package nodelabels

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Node is held to the labels the kubelet sets, and to what the Node reports of itself.
func TestMissingNamesEachWrongLabel(t *testing.T) {
	node := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: labels},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64"},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "w1"}}}}
	}
	good := map[string]string{corev1.LabelHostname: "w1", corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}
	if got := Missing(node(good)); len(got) != 0 {
		t.Errorf("a well-labelled Node: %v", got)
	}
	got := strings.Join(Missing(node(map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "arm64"})), "; ")
	want := `Node w1 has no label kubernetes.io/hostname; Node w1: label kubernetes.io/arch="arm64", but the Node reports "amd64"`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
