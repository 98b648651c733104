package sim

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// guestMirrors is what a worker that joins by itself needs to pull its images: every registry
// the local registry stands for, mirrored to it. It is the sim's one change to a Talos pool's
// bootstrap data, and it exists because this machine has no registry outside: Cozystack v1.6.1
// gives tenant workers no registry mirrors (packages/apps/kubernetes/README.md line 90, "in-guest
// container-image pulls ... still honour no per-tenant registries.mirrors override"), so a real
// worker pulls pause and the workload from their own registries.
//
// The change is a strategic patch added to each TalosConfigTemplate as it is admitted, before
// Cluster API clones a TalosConfig from it. CABPT applies it to the chart's machine
// configuration as it applies any (cluster-api-bootstrap-provider-talos v0.6.12
// controllers/talosconfig_controller.go lines 333-355), so the guest reads it at
// machine.registries.mirrors as a Talos worker would (github.com/siderolabs/talos/pkg/machinery
// v1.13.6 config/types/v1alpha1/v1alpha1_types.go lines 1070-1082, RegistryMirrors, and
// 2267-2285, RegistryMirrorConfig: MirrorEndpoints, MirrorSkipFallback). skipFallback keeps every pull on the local registry: no name falls back to a
// registry outside.
type guestMirrors struct {
	mu    sync.Mutex
	patch string // "" until the local registry is up
}

// set makes the patch name registry (host:port) as the mirror of hosts.
func (g *guestMirrors) set(registry string, hosts []string) error {
	mirrors := map[string]any{}
	for _, h := range hosts {
		mirrors[h] = map[string]any{"endpoints": []string{"http://" + registry}, "skipFallback": true}
	}
	data, err := yaml.Marshal(map[string]any{"machine": map[string]any{"registries": map[string]any{"mirrors": mirrors}}})
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.patch = string(data)
	return nil
}

func (g *guestMirrors) current() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.patch
}

// webhook adds the patch to each TalosConfigTemplate created or updated (the chart's
// talos-reconcile Job applies them with kubectl: packages/apps/kubernetes/templates/talos/
// talos-reconcile-job.yaml lines 320-340). One made before the local registry is up is refused,
// so the Job's kubectl fails and its Job retries, rather than a worker starting without it.
func (g *guestMirrors) webhook() simenv.Webhook {
	return simenv.Webhook{
		Name: "sim-guest-mirrors.bootstrap.cluster.x-k8s.io",
		Rules: []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule: admissionv1.Rule{APIGroups: []string{names.TalosConfigGVK.Group}, APIVersions: []string{names.TalosConfigGVK.Version},
				Resources: []string{"talosconfigtemplates"}},
		}},
		Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
			patch := g.current()
			if patch == "" {
				return admission.Denied("the sim's local registry is not up yet, so no registry mirror can be given to the pool's workers; retry")
			}
			t := &unstructured.Unstructured{}
			if err := t.UnmarshalJSON(req.Object.Raw); err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
			path := []string{"spec", "template", "spec", "strategicPatches"}
			patches, _, err := unstructured.NestedStringSlice(t.Object, path...)
			if err != nil {
				return admission.Errored(http.StatusBadRequest, fmt.Errorf("%s: %w", "spec.template.spec.strategicPatches", err))
			}
			if slices.Contains(patches, patch) {
				return admission.Allowed("")
			}
			if err := unstructured.SetNestedStringSlice(t.Object, append(patches, patch), path...); err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			out, err := t.MarshalJSON()
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			return admission.PatchResponseFromRaw(req.Object.Raw, out)
		}),
	}
}
