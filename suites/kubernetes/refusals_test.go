package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// The refusal cluster's pools: one per built-in class, at zero replicas, so nothing boots.
const (
	refusalTalos  = "rtalos"
	refusalKairos = "rkairos"
)

// refusalSpec is the refusal cluster: one pool per built-in class, at zero replicas.
func refusalSpec(st *state) tenant.ClusterSpec {
	return tenant.ClusterSpec{Names: st.refusals, Version: st.s.Lane.Kubernetes.Version, Pools: []tenant.PoolSpec{
		{Name: refusalTalos, Class: tenant.ClassTalos}, {Name: refusalKairos, Class: tenant.ClassKairos}}}
}

// describeRefusals registers the refusal specs. They run on a second Kubernetes app whose
// pools have no replicas: the platform renders them (MachineDeployments, templates) and the
// chart's refusals show on its HelmRelease without a VM ever being made.
func (st *state) describeRefusals() {
	var (
		ctx    context.Context
		span   *budget.Span
		failed error
	)
	BeforeAll(func(spec SpecContext) {
		ctx, span = st.phase(context.WithoutCancel(spec), "refusals")
		Expect(st.created.refusals).To(BeTrue(), "the refusal cluster %s was not created: %v", st.refusals, st.refusalsCreated)
		r, err := st.platform.WaitRendered(ctx, "refusals", st.refusals, 1)
		st.s.Must("", err)
		Expect(r.Ready).To(BeTrue(), "the platform refused the valid refusal cluster %s: %s", st.refusals, r.HelmRelease)
	})
	AfterEach(func() {
		if r := CurrentSpecReport(); r.Failed() {
			failed = errors.Join(failed, errors.New(r.LeafNodeText+": "+r.Failure.Message))
		}
	})
	AfterAll(func() {
		if span != nil {
			span.End(failed)
		}
	})
	within := func(spec context.Context) (context.Context, context.CancelFunc) {
		dl, _ := ctx.Deadline()
		c, cancel := context.WithDeadline(spec, dl)
		st.s.Within("refusals", c)
		return c, cancel
	}

	It("a running pool cannot switch from a Talos to a Kairos class", func(spec SpecContext) {
		c, cancel := within(spec)
		defer cancel()
		st.refused(c, refusalTalos, "nodeGroupClassName", func(g map[string]any) { g["nodeGroupClassName"] = tenant.ClassKairos }, "cannot switch")
	})
	It("a running pool cannot switch from a Kairos to a Talos class", func(spec SpecContext) {
		c, cancel := within(spec)
		defer cancel()
		st.refused(c, refusalKairos, "nodeGroupClassName", func(g map[string]any) { g["nodeGroupClassName"] = tenant.ClassTalos }, "cannot switch")
	})
	for _, f := range []struct {
		field string
		set   any
	}{
		{"osImage", "factory.talos.dev/installer/abc:v1.13.6"},
		{"kernelModules", []any{"drbd"}},
		{"gpus", []any{map[string]any{"name": "nvidia.com/GA102GL_A10"}}},
	} {
		field, set := f.field, f.set
		It(fmt.Sprintf("a Kairos pool with %s is refused", field), func(spec SpecContext) {
			c, cancel := within(spec)
			defer cancel()
			st.refused(c, refusalKairos, field, func(g map[string]any) { g[field] = set })
		})
	}
	It("an unknown class is refused, naming it", func(spec SpecContext) {
		c, cancel := within(spec)
		defer cancel()
		unknown := "no-such-class-" + st.s.Run.ID
		st.refused(c, refusalKairos, "nodeGroupClassName", func(g map[string]any) { g["nodeGroupClassName"] = unknown }, unknown)
	})
	for _, name := range []string{tenant.ClassTalos, tenant.ClassKairos} {
		It(fmt.Sprintf("the built-in class %s cannot be changed", name), func(spec SpecContext) {
			c, cancel := within(spec)
			defer cancel()
			st.builtInImmutable(c, name)
		})
	}
	It("a tenant's credentials cannot create a NodeGroupClass", func(spec SpecContext) {
		c, cancel := within(spec)
		defer cancel()
		st.tenantCannotCreateClass(c)
	})
	It("the cluster is accepted again once the refused fields are gone", func(spec SpecContext) {
		c, cancel := within(spec)
		defer cancel()
		st.recovered(c)
	})
}

// refused changes nodeGroups.<pool> with mutate and checks that the platform refuses it: the
// HelmRelease goes Ready=False with a message naming nodeGroups.<pool>.<field> (and each of
// also), the app's status mirrors it, and the live objects stay as they were. The pool is
// written back with the next change of the app (one render each), the last spec included.
func (st *state) refused(ctx context.Context, pool, field string, mutate func(map[string]any), also ...string) {
	AddReportEntry("refusal", "nodeGroups."+pool+"."+field)
	app, err := st.platform.Get(ctx, st.refusals)
	st.must(err)
	orig, _, _ := unstructured.NestedMap(app.Object, "spec", "nodeGroups", pool)
	Expect(orig).NotTo(BeNil(), "refusal cluster %s has no pool %s", st.refusals, pool)
	if restore, ok := st.restores[pool]; ok {
		orig = restore // the pool is still changed by the previous spec
	}
	before := st.live(ctx, pool)
	changes := st.takeRestores()
	changes[pool] = func(g map[string]any) { tenant.Restore(orig)(g); mutate(g) }
	gen, err := st.platform.UpdatePools(ctx, st.refusals, changes)
	st.must(err)
	st.restores[pool] = orig
	r, err := st.platform.WaitRendered(ctx, "refusals", st.refusals, gen)
	st.must(err)
	where := "nodeGroups." + pool + "." + field
	Expect(r.Ready).To(BeFalse(), "the platform accepted %s (HelmRelease: %s)", where, r.HelmRelease)
	Expect(r.HelmRelease).To(ContainSubstring(where), "the HelmRelease's message names the pool and field")
	for _, s := range also {
		Expect(r.HelmRelease).To(ContainSubstring(s))
	}
	Expect(r.Message).To(Equal(r.HelmRelease), "the app's Ready message mirrors the HelmRelease's")
	Expect(st.live(ctx, pool)).To(Equal(before), "a refused render changed the live objects of pool %s", pool)
}

// takeRestores are the write-backs of the pools earlier specs changed, to go with the next
// write; they are forgotten once taken.
func (st *state) takeRestores() map[string]func(map[string]any) {
	out := map[string]func(map[string]any){}
	for pool, orig := range st.restores {
		out[pool] = tenant.Restore(orig)
		delete(st.restores, pool)
	}
	return out
}

// recovered writes the refused pools back and checks that the refusal cluster, its pools as
// created, renders again.
func (st *state) recovered(ctx context.Context) {
	gen := int64(0)
	if changes := st.takeRestores(); len(changes) > 0 {
		var err error
		gen, err = st.platform.UpdatePools(ctx, st.refusals, changes)
		st.must(err)
	}
	app, err := st.platform.Get(ctx, st.refusals)
	st.must(err)
	for pool, class := range map[string]string{refusalTalos: tenant.ClassTalos, refusalKairos: tenant.ClassKairos} {
		got, _, _ := unstructured.NestedString(app.Object, "spec", "nodeGroups", pool, "nodeGroupClassName")
		Expect(got).To(Equal(class), "nodeGroups.%s.nodeGroupClassName after the refusals", pool)
	}
	r, err := st.platform.WaitRendered(ctx, "refusals", st.refusals, max(gen, app.GetGeneration()))
	st.must(err)
	Expect(r.Ready).To(BeTrue(), "the refusal cluster, its pools as created, is still refused: %s", r.HelmRelease)
}

// must fails the spec on an API error of the refusals phase (a deadline if the phase's time ran out).
func (st *state) must(err error) { st.s.MustIn("refusals", "", err) }

// liveState is what a refused render must leave alone: what the pool's MachineDeployment
// runs (bootstrap template, machine template, version) and its KubevirtMachineTemplates. Its
// generation is not part of it: re-applying the same content may bump it.
type liveState struct {
	Bootstrap       string
	Infrastructure  string
	Version         string
	MachineTemplate []string
}

func (st *state) live(ctx context.Context, pool string) liveState {
	pn := st.refusals.Pool(pool)
	var md clusterv1.MachineDeployment
	st.must(st.s.Mgmt.Client.Get(ctx, types.NamespacedName{Namespace: pn.Namespace, Name: pn.MachineDeployment()}, &md))
	ls := liveState{Infrastructure: md.Spec.Template.Spec.InfrastructureRef.Name, Version: md.Spec.Template.Spec.Version,
		Bootstrap: md.Spec.Template.Spec.Bootstrap.ConfigRef.Kind + "/" + md.Spec.Template.Spec.Bootstrap.ConfigRef.Name}
	var kmts unstructured.UnstructuredList
	kmts.SetGroupVersionKind(tenant.KubevirtMachineTemplateGVK.GroupVersion().WithKind("KubevirtMachineTemplateList"))
	st.must(st.s.Mgmt.Client.List(ctx, &kmts, client.InNamespace(pn.Namespace)))
	for _, k := range kmts.Items {
		if pn.IsMachineTemplate(k.GetName()) {
			ls.MachineTemplate = append(ls.MachineTemplate, k.GetName())
		}
	}
	return ls
}

// builtInImmutable tries to give built-in class name an image; the apiserver must refuse it
// and the class must be unchanged.
func (st *state) builtInImmutable(ctx context.Context, name string) {
	c := st.s.Mgmt.Client
	class := &unstructured.Unstructured{}
	class.SetGroupVersionKind(tenant.NodeGroupClassGVK)
	st.must(c.Get(ctx, types.NamespacedName{Name: name}, class))
	before, _, _ := unstructured.NestedMap(class.Object, "spec")
	changed := tenant.NodeGroupClass(lane.Class{Name: name, OS: osfamily.Kairos,
		Image: "registry.example.invalid/e2e/kairos@sha256:" + strings.Repeat("0", 63) + "2", KubernetesVersion: st.s.Lane.Kubernetes.Patch})
	class.Object["spec"] = changed.Object["spec"]
	err := c.Update(ctx, class)
	if errors.Is(err, context.DeadlineExceeded) {
		st.must(err)
	}
	Expect(err).To(HaveOccurred(), "the apiserver accepted a change to the built-in class %s", name)
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the change to %s was refused, but not as invalid: %v", name, err)
	Expect(err.Error()).To(Or(ContainSubstring("immutable"), ContainSubstring("built-in")), "refusal of the change to %s", name)
	after := &unstructured.Unstructured{}
	after.SetGroupVersionKind(tenant.NodeGroupClassGVK)
	st.must(c.Get(ctx, types.NamespacedName{Name: name}, after))
	Expect(after.Object["spec"]).To(Equal(before), "the built-in class %s changed", name)
}

// tenantCannotCreateClass acts as a member of the group the platform's RoleBinding in the
// tenant namespace grants: it can read its own apps (the credentials work), and cannot
// create a NodeGroupClass.
func (st *state) tenantCannotCreateClass(ctx context.Context) {
	ns := st.s.Run.Namespace()
	var rbs rbacv1.RoleBindingList
	st.must(st.s.Mgmt.Client.List(ctx, &rbs, client.InNamespace(ns)))
	binding, group := "", ""
	for _, rb := range rbs.Items {
		for _, s := range rb.Subjects {
			if s.Kind == rbacv1.GroupKind && group == "" {
				binding, group = rb.Name, s.Name
			}
		}
	}
	Expect(group).NotTo(BeEmpty(), "no RoleBinding in %s grants a group; the platform binds the tenant's group there", ns)
	AddReportEntry("tenant group", fmt.Sprintf("%s (RoleBinding %s/%s)", group, ns, binding))
	cfg := rest.CopyConfig(st.s.Mgmt.REST)
	cfg.WrapTransport = nil // cluster.New wraps it again
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "e2e-tenant-member-" + st.s.Run.ID, Groups: []string{group, "system:authenticated"}}
	as, err := cluster.New("tenant member", cfg)
	st.must(err)
	var apps unstructured.UnstructuredList
	apps.SetGroupVersionKind(tenant.KubernetesGVK.GroupVersion().WithKind("KubernetesList"))
	err = as.Client.List(ctx, &apps, client.InNamespace(ns))
	if errors.Is(err, context.DeadlineExceeded) {
		st.must(err)
	}
	Expect(err).NotTo(HaveOccurred(),
		"a member of %s cannot list the Kubernetes apps of its own namespace %s: the impersonation or the binding is broken, so the refusal below would prove nothing", group, ns)
	name := "e2e-tenant-class-" + st.s.Run.ID
	err = as.Client.Create(ctx, tenant.NodeGroupClass(lane.Class{Name: name, OS: osfamily.Kairos}))
	if errors.Is(err, context.DeadlineExceeded) {
		st.must(err)
	}
	Expect(err).To(HaveOccurred(), "a member of %s created NodeGroupClass %s", group, name)
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating a NodeGroupClass as a member of %s failed, but not as forbidden: %v", group, err)
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(tenant.NodeGroupClassGVK)
	err = st.s.Mgmt.Client.Get(ctx, types.NamespacedName{Name: name}, probe)
	if !apierrors.IsNotFound(err) {
		st.must(err)
	}
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "NodeGroupClass %s exists", name)
}
