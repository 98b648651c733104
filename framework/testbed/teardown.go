package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Teardown is lane phase teardown: it deletes the Kubernetes apps and the Tenant app made in
// the run, waits until the tenant namespace holds no VM, VMI, DataVolume or PVC, and deletes
// the classes the run created. Each step that fails is a failure of class teardown (never a
// spec's); on a leak, the diagnostics (Options.Diagnostics) name the artifacts that show it,
// collected inside the phase, before the Tenant goes. Nothing is done when the tenant was never created or was deleted already
// (the deletion spec ran).
func (t *Tenant) Teardown(ctx context.Context) []verdict.Failure {
	t.mu.Lock()
	created, deleted := t.tenant, t.deleted
	t.mu.Unlock()
	var out []verdict.Failure
	fail := func(err error, ev []string) {
		if err != nil {
			out = append(out, verdict.Failure{Spec: "teardown", Class: verdict.Teardown, Stage: PhaseTeardown, Message: err.Error(), Evidence: ev})
		}
	}
	if !created && len(t.Clusters()) == 0 {
		// Nothing of the tenant is left to delete; the classes go with a single request each.
		if deleted {
			_ = t.o.Clock.Skip(PhaseTeardown, "the deletion spec deleted the tenant and checked it left nothing")
		}
		if len(t.Classes) > 0 {
			rctx, cancel := t.o.Clock.Root(context.WithoutCancel(ctx))
			defer cancel()
			fail(t.Platform.DeleteClasses(rctx, t.Classes), nil)
		}
		return out
	}
	pctx, span, err := t.o.Clock.Phase(ctx, PhaseTeardown)
	if err != nil {
		fail(err, nil)
		return out
	}
	defer func() {
		var first error
		if len(out) > 0 {
			first = errors.New(out[0].Message)
		}
		span.End(first)
	}()
	for _, n := range t.Clusters() {
		if err := t.Platform.DeleteApp(pctx, n); err != nil {
			fail(err, nil)
		} else {
			t.forgetCluster(n)
		}
	}
	if err := t.Platform.WaitDrained(pctx, t.o.Run.Namespace()); err != nil {
		var ev []string
		if d := t.o.Diagnostics; d != nil {
			ev = d.Collect(ctx, nil, verdict.Teardown, PhaseTeardown)
		}
		fail(err, ev)
	}
	// The last deletes are single requests: they go out even when the drain used up the
	// phase, bounded by the run's root deadline.
	rctx, cancel := t.o.Clock.Root(context.WithoutCancel(ctx))
	defer cancel()
	if created {
		if err := t.Platform.DeleteTenant(rctx, t.o.Run); err != nil {
			fail(err, nil)
		} else {
			t.forgetTenant()
		}
	}
	fail(t.Platform.DeleteClasses(rctx, t.Classes), nil)
	return out
}

// KeptPool names a failed pool's objects for kept.json: its MachineDeployment, its Machines
// (those not on their way out: a Machine being deleted may be gone by the time a person looks)
// and their VMIs. A listing error is written to log and leaves the lists empty.
func (t *Tenant) KeptPool(ctx context.Context, pool, failure string, log io.Writer) verdict.KeptPool {
	kp := verdict.KeptPool{Pool: pool, Failure: failure}
	lp, ok := t.Pool(pool)
	if !ok {
		return kp
	}
	p := lp.Names
	kp.Cluster, kp.MachineDeployment = p.Cluster(), p.MachineDeployment()
	var list clusterv1.MachineList
	if err := t.o.Management.Client.List(ctx, &list, client.InNamespace(p.Namespace), p.Selector()); err != nil {
		if log != nil {
			fmt.Fprintf(log, "keep: listing the Machines of pool %s: %v\n", pool, err)
		}
		return kp
	}
	for _, m := range list.Items {
		if m.DeletionTimestamp != nil {
			continue
		}
		kp.Machines = append(kp.Machines, m.Name)
		if m.Spec.InfrastructureRef.Name != "" {
			kp.VMIs = append(kp.VMIs, m.Spec.InfrastructureRef.Name)
		}
	}
	return kp
}

// Kept is what the tenant left standing (E2E_KEEP) for kept.json: its Tenant, namespace,
// classes and clusters; kubeconfigs are the kept kubeconfigs of the conformance clusters, by
// app (none for a cluster without one). The caller adds the failed pools (KeptPool).
func (t *Tenant) Kept(reason string, kubeconfigs map[tenant.Names]string) verdict.Kept {
	k := verdict.Kept{Reason: reason, Tenant: t.o.Run.TenantName(), Namespace: t.o.Run.Namespace(), Classes: t.Classes}
	for _, n := range t.Clusters() {
		k.Clusters = append(k.Clusters, verdict.KeptCluster{Name: n.Cluster(), Kubeconfig: kubeconfigs[n]})
	}
	return k
}
