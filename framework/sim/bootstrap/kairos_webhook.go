package bootstrap

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/sim/faults"
	"github.com/cozystack/cozy-e2e/framework/sim/names"
	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
)

// kairosWebhook is the Kairos provider's validating webhook on KairosConfigs: create and update,
// failurePolicy Fail (kairos-io/cluster-api-provider-kairos main c300236
// config/webhook/manifests.yaml:69-88, api/bootstrap/v1beta2/kairosconfig_webhook.go:74-90);
// there is none on KairosConfigTemplates. Cluster API's MachineSet clones a KairosConfig from the
// pool's template before it creates the Machine, so a refused config means no Machine at all,
// and the refusal shows only on the MachineSet (MachinesCreated=False, BootstrapTemplateCloningFailed).
// What it refuses is the v0.2 kubeadm worker path's rules (validateKubeadm).
func kairosWebhook(env *simenv.Env) simenv.ValidatingWebhook {
	return simenv.ValidatingWebhook{
		Name: "vkairosconfig.kb.io",
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
			if err := validateKubeadm(spec, join); err != nil {
				msg := fmt.Sprintf("KairosConfig.bootstrap.cluster.x-k8s.io %q is invalid: %v", cfg.GetName(), err)
				labels := cfg.GetLabels()
				pool := strings.TrimPrefix(labels[clusterv1.MachineDeploymentNameLabel], labels[clusterv1.ClusterNameLabel]+"-")
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
