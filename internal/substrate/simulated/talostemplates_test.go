package simulated

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/guestos"
	"github.com/cozystack/cozy-e2e/internal/sim/kamaji"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The TalosConfigTemplate webhook refuses a template until the local registry is up (and, for
// guest-endpoint-unreachable, the real Node); then every pool gets the mirrors, and each pool a
// guest fault targets gets that fault's patch alone, recorded as an observation.
func TestTalosTemplatesGiveEachPoolItsPatches(t *testing.T) {
	set, err := faults.Parse("guest-ca-wrong@md0,guest-endpoint-unreachable@md1,guest-kubelet-crash-once@md2")
	if err != nil {
		t.Fatal(err)
	}
	env := &simenv.Env{Faults: set, Dir: t.TempDir(), Now: time.Now}
	defer env.Close()
	tt, err := newTalosTemplates(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := tt.webhook().Handler
	review := func(pool string) admission.Response {
		t.Helper()
		tpl := map[string]any{"apiVersion": "bootstrap.cluster.x-k8s.io/v1alpha3", "kind": "TalosConfigTemplate",
			"metadata": map[string]any{"name": "tenant-x-" + pool, "namespace": "tenant-root",
				"ownerReferences": []any{map[string]any{"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1", "kind": "KamajiControlPlane", "name": "tenant-x", "uid": "u"}}},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"generateType": "none", "data": "machine: {}"}}}}
		raw, err := json.Marshal(tpl)
		if err != nil {
			t.Fatal(err)
		}
		return h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Namespace: "tenant-root", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
	}
	if r := review("md0"); r.Allowed {
		t.Fatal("a template admitted before the local registry is up")
	}
	if err := tt.setMirrors("192.0.2.2:5000", []string{"registry.k8s.io"}); err != nil {
		t.Fatal(err)
	}
	if r := review("md1"); r.Allowed || !strings.Contains(r.Result.Message, "real Node is not up") {
		t.Fatalf("guest-endpoint-unreachable's template before the real Node is up: allowed %v, %v", r.Allowed, r.Result)
	}
	tt.setUnreachable("10.89.7.254")
	changes := map[string]map[string]any{}
	for _, pool := range []string{"md0", "md1", "md2", "md3"} {
		r := review(pool)
		if !r.Allowed {
			t.Fatalf("pool %s: refused: %v", pool, r.Result)
		}
		changes[pool] = patched(t, r.Patches)
	}
	for pool, c := range changes {
		strategic, _ := c["strategicPatches"].([]any)
		if len(strategic) == 0 || !strings.Contains(strategic[0].(string), "http://192.0.2.2:5000") {
			t.Errorf("pool %s: no mirrors patch first: %v", pool, strategic)
		}
		joined := ""
		for _, p := range strategic[1:] {
			joined += p.(string)
		}
		_, ops := c["configPatches"]
		wantCA, wantOps, wantEnv := pool == "md0", pool == "md1", pool == "md2"
		if got := strings.Contains(joined, "ca:"); got != wantCA {
			t.Errorf("pool %s: wrong CA patch %v, want %v", pool, got, wantCA)
		}
		if ops != wantOps {
			t.Errorf("pool %s: configPatches %v, want %v", pool, c["configPatches"], wantOps)
		}
		if got := strings.Contains(joined, guestos.CrashOnceEnv); got != wantEnv {
			t.Errorf("pool %s: crash-once patch %v, want %v", pool, got, wantEnv)
		}
	}
	want := []any{map[string]any{"op": "replace", "path": "/machine/network/extraHostEntries/0/ip", "value": "10.89.7.254"}}
	if got := changes["md1"]["configPatches"]; !jsonEqual(got, want) {
		t.Errorf("md1's configPatches %v, want %v", got, want)
	}
	var env2 struct {
		Machine struct{ Env map[string]string } `json:"machine"`
	}
	if err := yaml.Unmarshal([]byte(changes["md2"]["strategicPatches"].([]any)[1].(string)), &env2); err != nil || env2.Machine.Env[guestos.CrashOnceEnv] != "true" {
		t.Errorf("md2's patch does not set machine.env %s=true: %+v %v", guestos.CrashOnceEnv, env2, err)
	}
	f, err := os.Open(env.ObservationsPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]faults.Name{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var o simenv.Observation
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatal(err)
		}
		seen[o.Pool] = o.Fault
	}
	if len(seen) != 3 || seen["md0"] != faults.GuestCAWrong || seen["md1"] != faults.GuestEndpointUnreachable || seen["md2"] != faults.GuestKubeletCrashOnce {
		t.Errorf("observations %v, want one per faulted pool", seen)
	}
}

// patched is spec.template.spec of the template after the webhook's JSON patch operations.
func patched(t *testing.T, ops []jsonpatch.JsonPatchOperation) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, op := range ops {
		switch {
		case op.Path == "/spec/template/spec/strategicPatches" || op.Path == "/spec/template/spec/configPatches":
			out[strings.TrimPrefix(op.Path, "/spec/template/spec/")] = op.Value
		default:
			t.Errorf("unexpected operation %s %s", op.Operation, op.Path)
		}
	}
	return out
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// guest-token-expired writes one bootstrap token per tenant through Kamaji's admin kubeconfig,
// and a real apiserver that authenticates bootstrap tokens refuses it (401); the same Secret
// without its expiration authenticates (403: known, not allowed), so the refusal is the
// expiration's.
func TestAnExpiredTokenIsWrittenIntoTheTenantAndRefused(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{ExtraArgs: []string{"--enable-bootstrap-token-auth=true"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(api.Admin(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// One apiserver plays both: the management cluster holding Kamaji's Secret, and the tenant.
	admin := api.Admin()
	kc, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"t": {Server: admin.Host, CertificateAuthorityData: admin.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"t": {ClientCertificateData: admin.CertData, ClientKeyData: admin.KeyData, Token: admin.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"t": {Cluster: "t", AuthInfo: "t"}},
		CurrentContext: "t",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-root"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-root", Name: kamaji.AdminKubeconfigSecret("tenant-x")},
		Data: map[string][]byte{kamaji.AdminKubeconfigKey: kc}}); err != nil {
		t.Fatal(err)
	}
	set, err := faults.Parse("guest-token-expired@md0")
	if err != nil {
		t.Fatal(err)
	}
	env := &simenv.Env{Faults: set, Dir: t.TempDir(), Now: time.Now}
	defer env.Close()
	tt, err := newTalosTemplates(env, c)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tt.expiredToken(ctx, "tenant-root", "tenant-x")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := tt.expiredToken(ctx, "tenant-root", "tenant-x"); err != nil || again != tok {
		t.Fatalf("a second pool of the tenant got %+v (%v), want the first's %+v", again, err, tok)
	}
	var patch struct {
		Cluster struct{ Token string } `json:"cluster"`
	}
	if err := yaml.Unmarshal([]byte(tok.patch), &patch); err != nil || !strings.HasPrefix(patch.Cluster.Token, tok.id+".") {
		t.Fatalf("patch %q (%v): want cluster.token %s.<secret>", tok.patch, err, tok.id)
	}
	kubelet, err := kubernetes.NewForConfig(&rest.Config{Host: admin.Host, BearerToken: patch.Cluster.Token, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	answer := func() error {
		_, err := kubelet.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		return err
	}
	if err := answer(); !apierrors.IsUnauthorized(err) {
		t.Fatalf("the expired token got %v, want 401 Unauthorized", err)
	}
	var sec corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "bootstrap-token-" + tok.id}, &sec); err != nil {
		t.Fatal(err)
	}
	delete(sec.Data, "expiration")
	if err := c.Update(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(ctx, t, "the same token without its expiration answered 403 Forbidden (authenticated)", 20*time.Second, func() (bool, string) {
		err := answer()
		return apierrors.IsForbidden(err), fmt.Sprintf("got %v", err)
	})
}
