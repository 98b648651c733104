package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

// LateSecretDelay is how long after a KairosConfig first found its password Secret missing the
// bootstrap-transient fault writes it, as an operator who applies it after the cluster.
const LateSecretDelay = 10 * time.Second

// passwordError is a password Secret the provider could not read.
type passwordError struct {
	ns, name string
	err      error
}

func (e *passwordError) Error() string { return e.err.Error() }
func (e *passwordError) Unwrap() error { return e.err }

// lateSecrets is the bootstrap-transient fault: the password Secret a targeted pool's
// KairosConfigs name is written LateSecretDelay after one first found it missing; the provider's
// failureReason is recorded when it is set and when it is cleared.
type lateSecrets struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]bool // Secrets to be written
	failing map[types.NamespacedName]bool // configs whose failureReason the fault set
}

// missing is a reconcile that failed with err: under the fault, a missing password Secret is
// recorded and written later.
func (l *lateSecrets) missing(ctx context.Context, r *kairos, s *scope, err error) {
	pool := standin.PoolOfMachine(s.machine)
	var pe *passwordError
	if !pool.Active(r.env, faults.BootstrapTransient) || !errors.As(err, &pe) || !apierrors.IsNotFound(pe.err) {
		return
	}
	cfg := types.NamespacedName{Namespace: s.config.GetNamespace(), Name: s.config.GetName()}
	sec := types.NamespacedName{Namespace: pe.ns, Name: pe.name}
	l.mu.Lock()
	if l.pending == nil {
		l.pending, l.failing = map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}
	}
	first, write := !l.failing[cfg], !l.pending[sec]
	l.failing[cfg], l.pending[sec] = true, true
	l.mu.Unlock()
	if first {
		_ = r.env.Observe(simenv.Observation{Fault: faults.BootstrapTransient, Pool: pool.Name, Object: "KairosConfig/" + cfg.Namespace + "/" + cfg.Name,
			Detail: "failureReason " + KairosGenerationFailed + " set: " + err.Error()})
	}
	if !write {
		return
	}
	time.AfterFunc(LateSecretDelay, func() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sec.Namespace, Name: sec.Name},
			Data: map[string][]byte{"password": []byte("!")}}
		if err := r.c.Create(wctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			_ = r.env.Observe(simenv.Observation{Fault: faults.BootstrapTransient, Pool: pool.Name, Object: "Secret/" + sec.Namespace + "/" + sec.Name,
				Detail: "the late password Secret could not be written: " + err.Error()})
		}
	})
}

// cleared is a reconcile that succeeded: a failureReason the fault set is now cleared.
func (l *lateSecrets) cleared(r *kairos, s *scope) {
	cfg := types.NamespacedName{Namespace: s.config.GetNamespace(), Name: s.config.GetName()}
	l.mu.Lock()
	was := l.failing[cfg]
	delete(l.failing, cfg)
	l.mu.Unlock()
	if was {
		_ = r.env.Observe(simenv.Observation{Fault: faults.BootstrapTransient, Pool: standin.PoolOfMachine(s.machine).Name,
			Object: "KairosConfig/" + cfg.Namespace + "/" + cfg.Name, Detail: "failureReason cleared: the bootstrap data is written"})
	}
}

// passwordSecretConfigs wakes the KairosConfigs that name Secret o as their password. The
// provider at main c300236 maps only CAPK's -userdata Secrets to their configs
// (kairosconfig_controller.go:1476-1520) and otherwise re-reconciles a config on its own status
// change, its Machine's and its infrastructure machine's (:1429-1467), so a password Secret
// that comes late is read at the next of those; the sim wakes the config when it comes,
// standing in for that next event.
func passwordSecretConfigs(c client.Client) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(names.KairosConfigGVK.GroupVersion().WithKind(names.KairosConfigGVK.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, it := range list.Items {
			name, _, _ := unstructured.NestedString(it.Object, "spec", "userPasswordSecretRef", "name")
			ns, _, _ := unstructured.NestedString(it.Object, "spec", "userPasswordSecretRef", "namespace")
			if name == o.GetName() && (ns == "" || ns == o.GetNamespace()) {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: it.GetNamespace(), Name: it.GetName()}})
			}
		}
		return out
	}
}

// postBootstrapStage is the cloud-config stage the post-bootstrap step runs in.
const postBootstrapStage = "kubeadm.after"

// postBootstrap is the step that waits for the worker's Node and patches its providerID, as
// the provider's CAPK template does once the Node registered (k0s_kairos_cloud_config_capk.yaml.tmpl:527-567:
// kubectl get node $(hostname) every 5 s, then kubectl patch node $(hostname) spec.providerID,
// 30 tries 5 s apart). The template renders it only once the KubevirtMachine has its providerID,
// which CAPK sets after the VMI is Ready, after KubeVirt built the config drive the guest reads;
// the release #4911 pins (v0.2.1, not readable) joined its workers with a providerID on their
// first boot (the seed), which the sim models by rendering the step at once with the providerID
// CAPK derives from the KubevirtMachine's name (pkg/kubevirt/machine.go:390).
func postBootstrap(providerID string) map[string]any {
	return map[string]any{"name": "Set the Node's providerID", "commands": []any{
		`until kubectl get node "$(hostname)"; do sleep 5; done`,
		fmt.Sprintf(`kubectl patch node "$(hostname)" --type=merge -p '{"spec":{"providerID":%q}}'`, providerID),
	}}
}
