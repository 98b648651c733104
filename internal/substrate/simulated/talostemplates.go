package simulated

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/guestos"
	"github.com/cozystack/cozy-e2e/internal/sim/kamaji"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/platform"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// talosTemplates changes what a Talos pool's workers are given on a lane with a real Node,
// where the workers join by themselves, through patches added to each TalosConfigTemplate as it
// is admitted, before Cluster API clones a TalosConfig from it. CABPT applies them to the
// chart's machine configuration as it applies any: JSON6902 configPatches first, then
// strategicPatches through Talos' configpatcher (cluster-api-bootstrap-provider-talos v0.6.12
// controllers/talosconfig_controller.go lines 311-355), so the guest reads them where a Talos
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
// The others are the guest faults, each for the pools it targets (patches).
type talosTemplates struct {
	env *simenv.Env
	// mgmt reads the tenants' admin kubeconfigs (guest-token-expired).
	mgmt client.Reader

	mu          sync.Mutex
	mirrors     string // "" until the local registry is up
	unreachable string // the address of guest-endpoint-unreachable, "" until the real Node is up
	wrongCA     string // the patch of guest-ca-wrong
	// expired holds, per tenant (namespace/release), guest-token-expired's token: its Secret
	// in that tenant expired.
	expired map[string]expiredToken
}

// expiredToken is guest-token-expired's strategic patch for one tenant and its token's id.
type expiredToken struct{ patch, id string }

func newTalosTemplates(env *simenv.Env, mgmt client.Reader) (*talosTemplates, error) {
	t := &talosTemplates{env: env, mgmt: mgmt, expired: map[string]expiredToken{}}
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

// setUnreachable makes addr the address guest-endpoint-unreachable gives the tenant Service's
// name: one on the real Node's pod network that no pod holds (node.Node.Unassigned).
func (t *talosTemplates) setUnreachable(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unreachable = addr
}

// change is what the template of one pool is given: strategic patches, JSON6902 operations,
// and an observation for each fault among them.
type change struct {
	strategic []string
	json6902  []map[string]any
	observed  []simenv.Observation
}

// patches is the change for the template of pool in the tenant of release in namespace; an
// error says why none can be given yet (the local registry or the real Node not up, the
// tenant's apiserver not answering), and the template is refused until it can.
func (t *talosTemplates) patches(ctx context.Context, namespace, release, pool, object string) (change, error) {
	t.mu.Lock()
	mirrors, unreachable, wrongCA := t.mirrors, t.unreachable, t.wrongCA
	t.mu.Unlock()
	if mirrors == "" {
		return change{}, fmt.Errorf("the sim's local registry is not up yet, so no registry mirror can be given to the pool's workers; retry")
	}
	c := change{strategic: []string{mirrors}}
	active := func(f faults.Name) bool { return t.env.Faults.Active(f, pool, false) }
	observe := func(f faults.Name, detail string) {
		c.observed = append(c.observed, simenv.Observation{Fault: f, Pool: pool, Object: object, Detail: detail})
	}
	if wrongCA != "" && active(faults.GuestCAWrong) {
		c.strategic = append(c.strategic, wrongCA)
		observe(faults.GuestCAWrong, "cluster.ca.crt replaced by a CA that did not sign the tenant's apiserver")
	}
	if active(faults.GuestTokenExpired) {
		tok, err := t.expiredToken(ctx, namespace, release)
		if err != nil {
			return change{}, err
		}
		c.strategic = append(c.strategic, tok.patch)
		observe(faults.GuestTokenExpired, "cluster.token replaced by bootstrap token "+tok.id+", whose Secret kube-system/"+bootstrapapi.BootstrapTokenSecretPrefix+tok.id+" in the tenant expired an hour before it was written")
	}
	if active(faults.GuestEndpointUnreachable) {
		if unreachable == "" {
			return change{}, fmt.Errorf("the sim's real Node is not up yet, so guest-endpoint-unreachable has no address to give the pool's workers; retry")
		}
		// The chart's one host entry names the tenant apiserver's Service (cozystack v1.6.1
		// packages/apps/kubernetes/templates/talos/talos-reconcile-job.yaml:375-379).
		c.json6902 = append(c.json6902, map[string]any{"op": "replace", "path": "/machine/network/extraHostEntries/0/ip", "value": unreachable})
		observe(faults.GuestEndpointUnreachable, "machine.network.extraHostEntries[0].ip (the tenant apiserver Service's name) replaced by "+unreachable+", which no pod of the real Node holds")
	}
	if active(faults.GuestKubeletCrashOnce) {
		patch, err := yaml.Marshal(map[string]any{"machine": map[string]any{"env": map[string]string{guestos.CrashOnceEnv: "true"}}})
		if err != nil {
			return change{}, err
		}
		c.strategic = append(c.strategic, string(patch))
		observe(faults.GuestKubeletCrashOnce, "machine.env "+guestos.CrashOnceEnv+"=true: the stand-in OS kills its kubelet once per boot")
	}
	return c, nil
}

// expiredToken is guest-token-expired's token for the tenant of release in namespace: a
// bootstrap token the sim writes into that tenant, through Kamaji's admin kubeconfig, as the
// chart's bootstrap-token-tenant Job writes its own (platform.BootstrapTokenSecret), but with an
// expiration an hour past. The tenant apiserver
// authenticates no one by it (k8s.io/kubernetes v1.35.4
// plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go:129-131, HasExpired), whether the
// Secret is still there or the tenant's token cleaner took it.
func (t *talosTemplates) expiredToken(ctx context.Context, namespace, release string) (expiredToken, error) {
	key := namespace + "/" + release
	t.mu.Lock()
	tok, ok := t.expired[key]
	t.mu.Unlock()
	if ok {
		return tok, nil
	}
	var admin corev1.Secret
	if err := t.mgmt.Get(ctx, client.ObjectKey{Namespace: namespace, Name: kamaji.AdminKubeconfigSecret(release)}, &admin); err != nil {
		return expiredToken{}, fmt.Errorf("guest-token-expired: reading Kamaji's admin kubeconfig Secret %s/%s: %w; retry", namespace, kamaji.AdminKubeconfigSecret(release), err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(admin.Data[kamaji.AdminKubeconfigKey])
	if err != nil {
		return expiredToken{}, fmt.Errorf("guest-token-expired: Secret %s/%s key %s: %w", namespace, admin.Name, kamaji.AdminKubeconfigKey, err)
	}
	tenant, err := client.New(cfg, client.Options{})
	if err != nil {
		return expiredToken{}, err
	}
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return expiredToken{}, err
	}
	id, secret, _ := strings.Cut(token, ".")
	sec := platform.BootstrapTokenSecret(id, secret, "expired bootstrap token of the sim's fault guest-token-expired", t.env.Now().Add(-time.Hour))
	if err := tenant.Create(ctx, sec); err != nil {
		return expiredToken{}, fmt.Errorf("guest-token-expired: writing Secret kube-system/%s into the tenant %s: %w; retry", sec.Name, key, err)
	}
	data, err := yaml.Marshal(map[string]any{"cluster": map[string]any{"token": token}})
	if err != nil {
		return expiredToken{}, err
	}
	tok = expiredToken{patch: string(data), id: id}
	t.mu.Lock()
	t.expired[key] = tok
	t.mu.Unlock()
	return tok, nil
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
		Handler: admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
			tpl := &unstructured.Unstructured{}
			if err := tpl.UnmarshalJSON(req.Object.Raw); err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
			pool, release := tpl.GetName(), ""
			for _, o := range tpl.GetOwnerReferences() {
				if o.Kind == "KamajiControlPlane" {
					pool, release = strings.TrimPrefix(pool, o.Name+"-"), o.Name
				}
			}
			object := "TalosConfigTemplate/" + req.Namespace + "/" + tpl.GetName()
			c, err := t.patches(ctx, req.Namespace, release, pool, object)
			if err != nil {
				return admission.Denied(err.Error())
			}
			spec := []string{"spec", "template", "spec"}
			patches, _, err := unstructured.NestedStringSlice(tpl.Object, append(spec, "strategicPatches")...)
			if err != nil {
				return admission.Errored(http.StatusBadRequest, fmt.Errorf("spec.template.spec.strategicPatches: %w", err))
			}
			ops, _, err := unstructured.NestedSlice(tpl.Object, append(spec, "configPatches")...)
			if err != nil {
				return admission.Errored(http.StatusBadRequest, fmt.Errorf("spec.template.spec.configPatches: %w", err))
			}
			changed := false
			for _, p := range c.strategic {
				if !slices.Contains(patches, p) {
					patches, changed = append(patches, p), true
				}
			}
			for _, op := range c.json6902 {
				if !slices.ContainsFunc(ops, func(o any) bool { return equality.Semantic.DeepEqual(o, op) }) {
					ops, changed = append(ops, op), true
				}
			}
			if !changed {
				return admission.Allowed("")
			}
			for _, o := range c.observed {
				_ = t.env.Observe(o)
			}
			if err := unstructured.SetNestedStringSlice(tpl.Object, patches, append(spec, "strategicPatches")...); err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			if len(ops) > 0 {
				if err := unstructured.SetNestedSlice(tpl.Object, ops, append(spec, "configPatches")...); err != nil {
					return admission.Errored(http.StatusInternalServerError, err)
				}
			}
			out, err := tpl.MarshalJSON()
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			return admission.PatchResponseFromRaw(req.Object.Raw, out)
		}),
	}
}
