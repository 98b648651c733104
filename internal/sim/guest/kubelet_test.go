package guest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/sim/kamaji"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// A Talos kubelet the tenant refuses because it does not hold the bootstrap token yet (the
// chart's bootstrap-token-tenant Job has not run) is restarted, as Talos restarts it, and joins
// once the tenant holds the token; the guest log says both.
func TestTalosKubeletJoinsOnceTheTenantHoldsItsToken(t *testing.T) {
	w := start(t, "")
	ctx := t.Context()
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-" + tokenID}}
	testkit.Must(t, w.tenant.Client.Delete(ctx, token))
	name := release + "-md0-abcde-late1"
	w.machine(t, "md0", name, false)

	logText := func() string { b, _ := os.ReadFile(w.env.GuestLogPath()); return string(b) }
	w.until(t, "the kubelet's first refusal in the guest log", func(context.Context) (bool, error) {
		return strings.Contains(logText(), "VMI "+ns+"/"+name+": the kubelet's TLS bootstrap failed, no Node"), nil
	})
	if err := w.tenant.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); err == nil {
		t.Fatalf("Node %s registered without a token the tenant holds", name)
	}
	testkit.Must(t, w.tenant.Client.Create(ctx, &corev1.Secret{ObjectMeta: token.ObjectMeta, Type: corev1.SecretTypeBootstrapToken,
		Data: map[string][]byte{"token-id": []byte(tokenID), "token-secret": []byte(tokenSecret),
			"usage-bootstrap-authentication": []byte("true"), "auth-extra-groups": []byte(kamaji.NodeBootstrapTokenAuthGroup)}}))
	w.until(t, "Node registered after the token appeared", func(ctx context.Context) (bool, error) {
		err := w.tenant.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{})
		return err == nil, client.IgnoreNotFound(err)
	})
	if !strings.Contains(logText(), "VMI "+ns+"/"+name+": the kubelet's TLS bootstrap succeeded at attempt ") {
		t.Errorf("the guest log does not say the late join:\n%s", logText())
	}
	var csrs certificatesv1.CertificateSigningRequestList
	testkit.Must(t, w.tenant.Client.List(ctx, &csrs))
	if len(csrs.Items) != 1 || len(csrs.Items[0].Status.Certificate) == 0 {
		t.Errorf("want the one signed CSR of the attempt the tenant accepted, got %d: %+v", len(csrs.Items), csrs.Items)
	}
}
