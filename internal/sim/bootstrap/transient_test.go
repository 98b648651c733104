package bootstrap

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	admissionapi "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/sim/bootdata"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// Under machineset-transient the provider's webhook cannot be called for a targeted pool's
// KairosConfigs during WebhookOutage from the first one it is asked about, and answers after;
// another pool's are answered throughout. Each moment is recorded.
func TestTheWebhookOutageLastsItsTimeForItsPoolOnly(t *testing.T) {
	set, err := faults.Parse("machineset-transient@kairos")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	env := &simenv.Env{Faults: set, Dir: t.TempDir(), Now: func() time.Time { return now }}
	hook := kairosWebhook(env)
	req := func(pool string) admission.Request {
		obj, _ := json.Marshal(map[string]any{"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KairosConfig",
			"metadata": map[string]any{"name": "kubernetes-t1-" + pool + "-abcde-fghij", "namespace": "tenant-x",
				"labels": map[string]any{"cluster.x-k8s.io/cluster-name": "kubernetes-t1", "cluster.x-k8s.io/deployment-name": "kubernetes-t1-" + pool}},
			"spec": map[string]any{"role": "worker", "distribution": "kubeadm", "kubernetesVersion": "v1.35.4", "userPassword": "!"}})
		return admission.Request{AdmissionRequest: admissionapi.AdmissionRequest{Operation: admissionapi.Create, Namespace: "tenant-x", Object: runtime.RawExtension{Raw: obj}}}
	}
	if !hook.Unavailable(req("kairos")) || hook.Unavailable(req("acme")) {
		t.Fatal("at the start: want the targeted pool's request unanswered and the other's answered")
	}
	now = now.Add(WebhookOutage - time.Second)
	if !hook.Unavailable(req("kairos")) {
		t.Fatal("within the outage the webhook answered")
	}
	now = now.Add(2 * time.Second)
	if hook.Unavailable(req("kairos")) {
		t.Fatal("after the outage the webhook is still unavailable")
	}
	cfg := req("kairos")
	if resp := hook.Handler.Handle(t.Context(), cfg); !resp.Allowed {
		t.Fatalf("a worker's KairosConfig refused: %+v", resp.Result)
	}
	data, err := os.ReadFile(env.ObservationsPath())
	if err != nil {
		t.Fatal(err)
	}
	var obs []simenv.Observation
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var o simenv.Observation
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatal(err)
		}
		obs = append(obs, o)
	}
	if len(obs) != 2 || !strings.Contains(obs[0].Detail, "cannot be called") || !strings.Contains(obs[1].Detail, "answers again") || obs[1].At.Sub(obs[0].At) < WebhookOutage {
		t.Fatalf("observations %+v", obs)
	}
}

// The post-bootstrap step the stand-in renders is read back by a guest as the providerID to
// patch onto its Node once it registered.
func TestThePostBootstrapStepIsReadBack(t *testing.T) {
	doc := map[string]any{"cluster": map[string]any{"config": "joinConfiguration: {}\n"},
		"stages": map[string]any{postBootstrapStage: []any{postBootstrap("kubevirt://vm-1")}}}
	body, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	d, err := bootdata.Parse(append([]byte("#cloud-config\n"), body...))
	if err != nil || d.PatchProviderID != "kubevirt://vm-1" || d.ProviderID != "" {
		t.Fatalf("%+v %v", d, err)
	}
}
