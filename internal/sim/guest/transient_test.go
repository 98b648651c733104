package guest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/sim/bootstrap"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/guest"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The faults a correct harness absorbs do what upstream does, and pass: under
// bootstrap-transient the Kairos provider's stand-in sets failureReason while the password
// Secret is missing and clears it once the Secret comes; under providerid-late a Kairos worker
// registers as metal-<id> without a providerID and patches it on ProviderIDLateDelay later. A
// Kairos worker without the fault patches its providerID as soon as its Node is there.
func TestTransientKairosFaultsClearAsUpstreamDoes(t *testing.T) {
	w := start(t, "bootstrap-transient@transient,providerid-late@late")
	ctx := t.Context()
	m := func(pool string) string { return release + "-" + pool + "-abcde-x7k2p" }
	// Kamaji's kubelet configuration, which a kubeadm join reads.
	testkit.Must(t, w.tenant.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.KubeletConfigNamespace, Name: names.KubeletConfigName},
		Data: map[string]string{names.KubeletConfigKey: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n- 10.95.0.10\n"}}))
	w.machineWith(t, "transient", m("transient"), true, map[string]any{"userPasswordSecretRef": map[string]any{"name": "pw", "key": "password"}})
	cfg := &unstructured.Unstructured{}
	cfg.SetGroupVersionKind(names.KairosConfigGVK)
	testkit.Must(t, w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m("transient")}, cfg))
	if r, _, _ := unstructured.NestedString(cfg.Object, "status", "failureReason"); r != "" {
		t.Errorf("the KairosConfig kept failureReason %q after its data was written", r)
	}
	w.machine(t, "late", m("late"), true)
	defer func() {
		if t.Failed() {
			log, _ := os.ReadFile(w.env.GuestLogPath())
			obs, _ := os.ReadFile(w.env.ObservationsPath())
			t.Logf("guests.log:\n%s\nobservations:\n%s", log, obs)
		}
	}()
	node := w.tenantNode(t, "the late worker's Node with its providerID", func(n corev1.Node) bool { return n.Spec.ProviderID == names.ProviderID(m("late")) })
	if !strings.HasPrefix(node.Name, "metal-") {
		t.Errorf("the late worker registered as Node %s, not under the provider's default prefix metal-", node.Name)
	}
	// The guest writes its observation after its patch succeeded: the Node may show the
	// providerID a moment before the line is in the file.
	var set, cleared, reg, patched simenv.Observation
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(w.env.ObservationsPath())
		testkit.Must(t, err)
		for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
			var o simenv.Observation
			testkit.Must(t, json.Unmarshal(sc.Bytes(), &o))
			switch {
			case o.Fault == faults.BootstrapTransient && strings.Contains(o.Detail, " set: "):
				set = o
			case o.Fault == faults.BootstrapTransient && strings.Contains(o.Detail, "cleared"):
				cleared = o
			case o.Fault == faults.ProviderIDLate && strings.Contains(o.Detail, "registered"):
				reg = o
			case o.Fault == faults.ProviderIDLate && strings.Contains(o.Detail, "patched"):
				patched = o
			}
		}
		if !patched.At.IsZero() || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(set.Detail, "get user password secret "+ns+"/pw: ") || !strings.Contains(set.Detail, "not found") {
		t.Errorf("bootstrap-transient: the failureReason set says %q, not the provider's words", set.Detail)
	}
	if cleared.At.IsZero() || cleared.At.Sub(set.At) < bootstrap.LateSecretDelay {
		t.Errorf("bootstrap-transient: set at %s, cleared at %s; want it cleared once the Secret came, %s later", set.At, cleared.At, bootstrap.LateSecretDelay)
	}
	if reg.At.IsZero() || patched.At.Sub(reg.At) < guest.ProviderIDLateDelay || patched.At.Sub(reg.At) > guest.ProviderIDLateDelay+5*time.Second {
		t.Errorf("providerid-late: registered at %s, patched at %s; want the patch %s after the registration", reg.At, patched.At, guest.ProviderIDLateDelay)
	}
	// The other Kairos worker patched its providerID at once.
	first := w.tenantNode(t, "the transient worker's Node with its providerID", func(n corev1.Node) bool { return n.Spec.ProviderID == names.ProviderID(m("transient")) })
	if d := first.CreationTimestamp.Sub(set.At); d < 0 {
		t.Errorf("the transient worker's Node registered before its bootstrap data existed (%s)", d)
	}
}
