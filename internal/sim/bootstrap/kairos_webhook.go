package bootstrap

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	admissionapi "k8s.io/api/admission/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// kairosWebhook is the Kairos provider's validating webhook on KairosConfigs: create and update,
// failurePolicy Fail (kairos-io/cluster-api-provider-kairos main c300236
// config/webhook/manifests.yaml:69-88, api/bootstrap/v1beta2/kairosconfig_webhook.go:74-90);
// there is none on KairosConfigTemplates. Cluster API's MachineSet clones a KairosConfig from the
// pool's template before it creates the Machine, so a refused config means no Machine at all,
// and the refusal shows only on the MachineSet (MachinesCreated=False, BootstrapTemplateCloningFailed).
// What it refuses is the v0.2 kubeadm worker path's rules (validateKubeadm).
func kairosWebhook(env *simenv.Env) simenv.Webhook {
	out := &outage{env: env, began: map[string]time.Time{}}
	return simenv.Webhook{
		Unavailable: out.down,
		Name:        "vkairosconfig.kb.io",
		Rules: []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule: admissionv1.Rule{APIGroups: []string{names.KairosConfigGVK.Group}, APIVersions: []string{names.KairosConfigGVK.Version},
				Resources: []string{"kairosconfigs"}},
		}},
		Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
			cfg := &unstructured.Unstructured{}
			if err := cfg.UnmarshalJSON(req.Object.Raw); err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
			raw, _, _ := unstructured.NestedMap(cfg.Object, "spec")
			js, _ := yaml.Marshal(raw)
			var spec kairosSpec
			if err := yaml.Unmarshal(js, &spec); err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
			join := map[string]any{}
			if spec.Kubeadm != nil && spec.Kubeadm.JoinConfiguration != nil {
				join = spec.Kubeadm.JoinConfiguration
			}
			out.answered(cfg)
			if err := validateKubeadm(spec, join); err != nil {
				msg := fmt.Sprintf("KairosConfig.bootstrap.cluster.x-k8s.io %q is invalid: %v", cfg.GetName(), err)
				pool := poolOf(cfg)
				if env.Faults.Active(faults.KairosConfigRefused, pool, true) {
					_ = env.Observe(simenv.Observation{Fault: faults.KairosConfigRefused, Pool: pool,
						Object: "KairosConfig/" + req.Namespace + "/" + cfg.GetName(), Detail: msg})
				}
				return admission.Denied(msg)
			}
			return admission.Allowed("")
		}),
	}
}

// WebhookOutage is how long the provider's webhook cannot be called for a pool under
// machineset-transient, from the first KairosConfig of the pool it was asked about.
const WebhookOutage = 20 * time.Second

// outage is the machineset-transient fault: the webhook's unavailability per targeted pool.
type outage struct {
	env   *simenv.Env
	mu    sync.Mutex
	began map[string]time.Time // by pool: when its outage began
	back  map[string]bool      // by pool: the webhook answered once the outage ended
}

// poolOf is the pool a cloned KairosConfig belongs to, by the labels Cluster API gives it.
func poolOf(cfg *unstructured.Unstructured) string {
	labels := cfg.GetLabels()
	return strings.TrimPrefix(labels[clusterv1.MachineDeploymentNameLabel], labels[clusterv1.ClusterNameLabel]+"-")
}

// down reports whether req finds the webhook unavailable, recording the first such request of
// each pool.
func (o *outage) down(req admission.Request) bool {
	cfg := &unstructured.Unstructured{}
	if req.Operation != admissionapi.Create || cfg.UnmarshalJSON(req.Object.Raw) != nil {
		return false
	}
	pool := poolOf(cfg)
	if !o.env.Faults.Active(faults.MachineSetTransient, pool, true) {
		return false
	}
	now := o.env.Now()
	o.mu.Lock()
	began, ok := o.began[pool]
	if !ok {
		o.began[pool], began = now, now
	}
	o.mu.Unlock()
	if !ok {
		_ = o.env.Observe(simenv.Observation{Fault: faults.MachineSetTransient, Pool: pool, Object: "KairosConfig/" + req.Namespace + "/" + cfg.GetName(),
			Detail: fmt.Sprintf("the provider's webhook cannot be called for %s", WebhookOutage)})
	}
	return now.Sub(began) < WebhookOutage
}

// answered records the first request of a pool the webhook answered after its outage.
func (o *outage) answered(cfg *unstructured.Unstructured) {
	pool := poolOf(cfg)
	o.mu.Lock()
	_, had := o.began[pool]
	first := had && !o.back[pool]
	if first {
		if o.back == nil {
			o.back = map[string]bool{}
		}
		o.back[pool] = true
	}
	o.mu.Unlock()
	if first {
		_ = o.env.Observe(simenv.Observation{Fault: faults.MachineSetTransient, Pool: pool, Object: "KairosConfig/" + cfg.GetNamespace() + "/" + cfg.GetName(),
			Detail: "the provider's webhook answers again"})
	}
}
