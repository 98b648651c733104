package sim

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// talosTemplates changes what a Talos pool's workers are given on a lane with a real Node,
// where the workers join by themselves, through strategic patches added to each
// TalosConfigTemplate as it is admitted, before Cluster API clones a TalosConfig from it. CABPT
// applies them to the chart's machine configuration as it applies any StrategicPatches, through
// Talos' configpatcher (cluster-api-bootstrap-provider-talos v0.6.12
// controllers/talosconfig_controller.go lines 333-355), so the guest reads them where a Talos
// worker would.
//
// One patch is the sim's one change to a healthy pool's bootstrap data: registry mirrors. It
// exists because this machine has no registry outside: Cozystack v1.6.1 gives tenant workers no
// registry mirrors (packages/apps/kubernetes/README.md line 90, "in-guest container-image pulls
// ... still honour no per-tenant registries.mirrors override"), so a real worker pulls pause and
// the workload from their own registries. Every registry the local registry serves is mirrored
// to it at machine.registries.mirrors (github.com/siderolabs/talos/pkg/machinery v1.13.6
// config/types/v1alpha1/v1alpha1_types.go lines 1070-1082, RegistryMirrors, and 2267-2285,
// RegistryMirrorConfig: MirrorEndpoints, MirrorSkipFallback); skipFallback keeps every pull on
// the local registry.
//
// The other is the fault guest-ca-wrong: cluster.ca.crt replaced by a CA that did not sign the
// tenant's apiserver, for the pools it targets.
type talosTemplates struct {
	env *simenv.Env

	mu      sync.Mutex
	mirrors string // "" until the local registry is up
	wrongCA string // the patch of guest-ca-wrong
}

func newTalosTemplates(env *simenv.Env) (*talosTemplates, error) {
	t := &talosTemplates{env: env}
	if !env.Faults.Selected(faults.GuestCAWrong) {
		return t, nil
	}
	ca, err := controlplane.NewCA("guest-ca-wrong")
	if err != nil {
		return nil, err
	}
	patch, err := yaml.Marshal(map[string]any{"cluster": map[string]any{"ca": map[string]any{"crt": base64.StdEncoding.EncodeToString(ca.CertPEM)}}})
	if err != nil {
		return nil, err
	}
	t.wrongCA = string(patch)
	return t, nil
}

// setMirrors makes the mirrors patch name registry (host:port) as the mirror of hosts.
func (t *talosTemplates) setMirrors(registry string, hosts []string) error {
	mirrors := map[string]any{}
	for _, h := range hosts {
		mirrors[h] = map[string]any{"endpoints": []string{"http://" + registry}, "skipFallback": true}
	}
	data, err := yaml.Marshal(map[string]any{"machine": map[string]any{"registries": map[string]any{"mirrors": mirrors}}})
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mirrors = string(data)
	return nil
}

// patches are the strategic patches for the template of pool; ok is false while the local
// registry is not up.
func (t *talosTemplates) patches(pool string) (out []string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mirrors == "" {
		return nil, false
	}
	out = append(out, t.mirrors)
	if t.wrongCA != "" && t.env.Faults.Active(faults.GuestCAWrong, pool, false) {
		out = append(out, t.wrongCA)
	}
	return out, true
}

// webhook adds the patches to each TalosConfigTemplate created or updated (the chart's
// talos-reconcile Job applies them with kubectl, named <release>-<pool> and owned by the
// release's KamajiControlPlane: github.com/cozystack/cozystack v1.6.1
// packages/apps/kubernetes/templates/talos/talos-reconcile-job.yaml lines 320-340,
// ownerReferences). One made before the local registry is up is refused, so the Job's
// kubectl fails and its Job retries, rather than a worker starting without its mirrors.
func (t *talosTemplates) webhook() simenv.Webhook {
	return simenv.Webhook{
		Name: "sim-talos-templates.bootstrap.cluster.x-k8s.io",
		Rules: []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule: admissionv1.Rule{APIGroups: []string{names.TalosConfigGVK.Group}, APIVersions: []string{names.TalosConfigGVK.Version},
				Resources: []string{"talosconfigtemplates"}},
		}},
		Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
			tpl := &unstructured.Unstructured{}
			if err := tpl.UnmarshalJSON(req.Object.Raw); err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
			pool := tpl.GetName()
			for _, o := range tpl.GetOwnerReferences() {
				if o.Kind == "KamajiControlPlane" {
					pool = strings.TrimPrefix(pool, o.Name+"-")
				}
			}
			add, ok := t.patches(pool)
			if !ok {
				return admission.Denied("the sim's local registry is not up yet, so no registry mirror can be given to the pool's workers; retry")
			}
			path := []string{"spec", "template", "spec", "strategicPatches"}
			patches, _, err := unstructured.NestedStringSlice(tpl.Object, path...)
			if err != nil {
				return admission.Errored(http.StatusBadRequest, fmt.Errorf("spec.template.spec.strategicPatches: %w", err))
			}
			changed := false
			for _, p := range add {
				if !slices.Contains(patches, p) {
					patches, changed = append(patches, p), true
				}
			}
			if !changed {
				return admission.Allowed("")
			}
			if slices.Contains(add, t.wrongCA) {
				_ = t.env.Observe(simenv.Observation{Fault: faults.GuestCAWrong, Pool: pool, Object: "TalosConfigTemplate/" + req.Namespace + "/" + tpl.GetName(),
					Detail: "cluster.ca.crt replaced by a CA that did not sign the tenant's apiserver"})
			}
			if err := unstructured.SetNestedStringSlice(tpl.Object, patches, path...); err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			out, err := tpl.MarshalJSON()
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			return admission.PatchResponseFromRaw(req.Object.Raw, out)
		}),
	}
}
