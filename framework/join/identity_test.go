package join

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Which Node is a worker's, and whether it has the identity its family gives it.

func TestANodeIsFoundByTheVMIAddressWhenNamedOtherwise(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{IPs: []string{"10.0.0.9"}}}
	nodes := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.8"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "metal-9"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}}}},
	}
	if n := attributeNode("vm-1", vmi, nodes); n == nil || n.Name != "metal-9" {
		t.Fatalf("%v", n)
	}
	if n := attributeNode("other", vmi, nodes); n == nil || n.Name != "other" {
		t.Fatalf("by name: %v", n)
	}
}

// A pod address is reused once its pod is gone; a Node whose guest went away (a stopped worker,
// not replaced yet) keeps the address. That Node is its own VMI's, not the new one's.
func TestAReusedAddressDoesNotMakeAnotherVMIsNodeOurs(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{IPs: []string{"10.0.0.9"}}}
	stale := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm-old"}, Spec: corev1.NodeSpec{ProviderID: tenant.ProviderID("vm-old")},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}}}}
	if n := attributeNode("vm-new", vmi, []corev1.Node{stale}); n != nil {
		t.Fatalf("the stopped worker's Node %s was taken for the new VMI's", n.Name)
	}
	wrong := stale
	wrong.Name = "metal-9" // a Node named otherwise carrying another VMI's providerID is still ours, and wrong
	if n := attributeNode("vm-new", vmi, []corev1.Node{wrong}); n == nil || n.Name != "metal-9" {
		t.Fatalf("%v", n)
	}
}

// A Kairos worker named by its hostnamePrefix with its VMI's providerID has the identity its
// family gives it; a Talos worker under another name does not.
func TestIdentityFollowsTheFamily(t *testing.T) {
	p := testPool(osfamily.Kairos, 1)
	v := joined(p, "m1")
	v.Node.Name = "metal-3f2a"
	v.Machine.Status.NodeRef.Name = "metal-3f2a"
	v.Workload.Spec.NodeName = "metal-3f2a"
	if out := evaluate(withTemplate(p, v)); out.Terminal != nil || !out.Done {
		t.Fatalf("kairos: %+v %+v", out, out.Terminal)
	}
	p = testPool(osfamily.Talos, 1)
	v = joined(p, "m1")
	v.Node.Name = "talos-abc-def"
	if out := evaluate(withTemplate(p, v)); out.Terminal == nil || out.Terminal.Class != verdict.Identity {
		t.Fatalf("talos: %+v", out)
	}
}
