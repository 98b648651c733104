package suiterun

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

// PhaseRefusals is the lane phase RefusalsSpec runs in.
const PhaseRefusals = "refusals"

// The refusal cluster's pools: one per built-in class, at zero replicas, so nothing boots.
const (
	refusalTalos  = "rtalos"
	refusalKairos = "rkairos"
)

// RefusalCluster is the cluster RefusalsSpec runs on: one pool per built-in class, at zero
// replicas, named names. Create it early (while the pools join), so the refusals only judge.
func RefusalCluster(names tenant.Names, version string) tenant.ClusterSpec {
	return tenant.ClusterSpec{Names: names, Version: version, Pools: []lane.Pool{
		{Name: refusalTalos, Class: tenant.ClassTalos}, {Name: refusalKairos, Class: tenant.ClassKairos}}}
}

// RefusalsSpecInput is the refusal cluster and what the refusals act with.
type RefusalsSpecInput struct {
	Management *cluster.Cluster
	Platform   tenant.Platform
	Clock      *budget.Clock
	Lane       *lane.Lane
	Run        tenant.Run
	// Cluster is the refusal cluster (RefusalCluster); Created says why it could not be
	// created (nil when it was).
	Cluster tenant.Names
	Created error
	// Before runs first, with the spec's context (the suite ends the pools phase there once
	// every join ended); nil: nothing.
	Before   func(context.Context)
	Failures *Failures
}

// RefusalsSpec registers the refusal specs, to be called inside an Ordered container of their
// own: on a second Kubernetes app whose pools have no replicas, the platform renders them and
// the chart's refusals show on its HelmRelease without a VM ever being made. A running pool
// cannot switch between Talos and Kairos classes, a Kairos pool refuses osImage,
// kernelModules and gpus, an unknown class is refused by name, the built-in classes cannot be
// changed, a tenant's credentials cannot create a class, and the cluster is accepted again
// once the refused fields are gone.
func RefusalsSpec(_ context.Context, inputGetter func() RefusalsSpecInput) {
	r := &refusals{restores: map[string]map[string]any{}}
	r.registerPhase(inputGetter)

	It("a running pool cannot switch from a Talos to a Kairos class", func(spec SpecContext) {
		c, cancel := r.inPhase(spec)
		defer cancel()
		r.refused(c, refusalTalos, "nodeGroupClassName", func(g map[string]any) { g["nodeGroupClassName"] = tenant.ClassKairos }, "cannot switch")
	})
	It("a running pool cannot switch from a Kairos to a Talos class", func(spec SpecContext) {
		c, cancel := r.inPhase(spec)
		defer cancel()
		r.refused(c, refusalKairos, "nodeGroupClassName", func(g map[string]any) { g["nodeGroupClassName"] = tenant.ClassTalos }, "cannot switch")
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
			c, cancel := r.inPhase(spec)
			defer cancel()
			r.refused(c, refusalKairos, field, func(g map[string]any) { g[field] = set })
		})
	}
	It("an unknown class is refused, naming it", func(spec SpecContext) {
		c, cancel := r.inPhase(spec)
		defer cancel()
		unknown := "no-such-class-" + r.in.Run.ID
		r.refused(c, refusalKairos, "nodeGroupClassName", func(g map[string]any) { g["nodeGroupClassName"] = unknown }, unknown)
	})
	for _, name := range []string{tenant.ClassTalos, tenant.ClassKairos} {
		It(fmt.Sprintf("the built-in class %s cannot be changed", name), func(spec SpecContext) {
			c, cancel := r.inPhase(spec)
			defer cancel()
			r.builtInImmutable(c, name)
		})
	}
	It("a tenant's credentials cannot create a NodeGroupClass", func(spec SpecContext) {
		c, cancel := r.inPhase(spec)
		defer cancel()
		r.tenantCannotCreateClass(c)
	})
	It("the cluster is accepted again once the refused fields are gone", func(spec SpecContext) {
		c, cancel := r.inPhase(spec)
		defer cancel()
		r.recovered(c)
	})
}

// refusals is the state the refusal specs share.
type refusals struct {
	in     RefusalsSpecInput
	ctx    context.Context
	span   *budget.Span
	failed error
	// restores are the refusal cluster's pools a refusal spec changed, as they were before:
	// the next write to the app puts them back.
	restores map[string]map[string]any
}

// registerPhase registers the hooks around the refusal specs: BeforeAll reads the input, runs
// its Before, opens the refusals phase and waits for the refusal cluster to render as valid;
// AfterEach notes each failed spec; AfterAll ends the phase with those failures.
func (r *refusals) registerPhase(inputGetter func() RefusalsSpecInput) {
	BeforeAll(func(spec SpecContext) {
		r.in = inputGetter()
		if r.in.Before != nil {
			r.in.Before(spec)
		}
		var err error
		r.ctx, r.span, err = r.in.Clock.Phase(context.WithoutCancel(spec), PhaseRefusals)
		Must(r.in.Failures, "", err)
		Expect(r.in.Created).NotTo(HaveOccurred(), "the refusal cluster %s was not created", r.in.Cluster)
		rd, err := r.in.Platform.WaitRendered(r.ctx, r.in.Cluster, 1)
		Must(r.in.Failures, "", err)
		Expect(rd.Ready).To(BeTrue(), "the platform refused the valid refusal cluster %s: %s", r.in.Cluster, rd.HelmRelease)
	})
	AfterEach(func() {
		if rep := CurrentSpecReport(); rep.Failed() {
			r.failed = errors.Join(r.failed, errors.New(rep.LeafNodeText+": "+rep.Failure.Message))
		}
	})
	AfterAll(func() {
		if r.span != nil {
			r.span.End(r.failed)
		}
	})
}

// inPhase is the spec's context, ending when the refusals phase does; the spec's assertions
// are bounded by it (Within).
func (r *refusals) inPhase(spec context.Context) (context.Context, context.CancelFunc) {
	dl, _ := r.ctx.Deadline()
	c, cancel := context.WithDeadline(spec, dl)
	Within(r.in.Failures, PhaseRefusals, c)
	return c, cancel
}

// must fails the spec on an API error of the refusals phase (a deadline if the phase's time ran out).
func (r *refusals) Must(err error) { MustIn(r.in.Failures, PhaseRefusals, "", err) }

// refused changes nodeGroups.<pool> with mutate and checks that the platform refuses it: the
// HelmRelease goes Ready=False with a message naming nodeGroups.<pool>.<field> (and each of
// also), the app's status mirrors it, and the live objects stay as they were. The pool is
// written back with the next change of the app (one render each), the last spec included.
func (r *refusals) refused(ctx context.Context, pool, field string, mutate func(map[string]any), also ...string) {
	AddReportEntry("refusal", "nodeGroups."+pool+"."+field)
	app, err := r.in.Platform.Get(ctx, r.in.Cluster)
	r.Must(err)
	orig, _, _ := unstructured.NestedMap(app.Object, "spec", "nodeGroups", pool)
	Expect(orig).NotTo(BeNil(), "refusal cluster %s has no pool %s", r.in.Cluster, pool)
	if restore, ok := r.restores[pool]; ok {
		orig = restore // the pool is still changed by the previous spec
	}
	before := r.live(ctx, pool)
	changes := r.takeRestores()
	changes[pool] = func(g map[string]any) { tenant.Restore(orig)(g); mutate(g) }
	gen, err := r.in.Platform.UpdatePools(ctx, r.in.Cluster, changes)
	r.Must(err)
	r.restores[pool] = orig
	rd, err := r.in.Platform.WaitRendered(ctx, r.in.Cluster, gen)
	r.Must(err)
	where := "nodeGroups." + pool + "." + field
	Expect(rd.Ready).To(BeFalse(), "the platform accepted %s (HelmRelease: %s)", where, rd.HelmRelease)
	// Every real refusal names the node group and the field, whatever its wording (the chart's
	// own read "nodeGroup <pool>: ...", packages/apps/kubernetes/templates/cluster.yaml).
	Expect(rd.HelmRelease).To(ContainSubstring(pool), "the HelmRelease's message names the pool (%s)", where)
	Expect(rd.HelmRelease).To(ContainSubstring(field), "the HelmRelease's message names the field (%s)", where)
	for _, s := range also {
		Expect(rd.HelmRelease).To(ContainSubstring(s))
	}
	Expect(r.live(ctx, pool)).To(Equal(before), "a refused render changed the live objects of pool %s", pool)
}

// takeRestores are the write-backs of the pools earlier specs changed, to go with the next
// write; they are forgotten once taken.
func (r *refusals) takeRestores() map[string]func(map[string]any) {
	out := map[string]func(map[string]any){}
	for pool, orig := range r.restores {
		out[pool] = tenant.Restore(orig)
		delete(r.restores, pool)
	}
	return out
}

// recovered writes the refused pools back and checks that the refusal cluster, its pools as
// created, renders again.
func (r *refusals) recovered(ctx context.Context) {
	gen := int64(0)
	if changes := r.takeRestores(); len(changes) > 0 {
		var err error
		gen, err = r.in.Platform.UpdatePools(ctx, r.in.Cluster, changes)
		r.Must(err)
	}
	app, err := r.in.Platform.Get(ctx, r.in.Cluster)
	r.Must(err)
	for pool, class := range map[string]string{refusalTalos: tenant.ClassTalos, refusalKairos: tenant.ClassKairos} {
		got, _, _ := unstructured.NestedString(app.Object, "spec", "nodeGroups", pool, "nodeGroupClassName")
		Expect(got).To(Equal(class), "nodeGroups.%s.nodeGroupClassName after the refusals", pool)
	}
	if gen == 0 {
		gen, err = r.in.Platform.ReleaseGeneration(ctx, r.in.Cluster)
		r.Must(err)
	}
	rd, err := r.in.Platform.WaitRendered(ctx, r.in.Cluster, gen)
	r.Must(err)
	Expect(rd.Ready).To(BeTrue(), "the refusal cluster, its pools as created, is still refused: %s", rd.HelmRelease)
}

// liveState is what a refused render must leave alone: what the pool's MachineDeployment
// runs (bootstrap template, machine template, version) and its KubevirtMachineTemplates. Its
// generation is not part of it: re-applying the same content may bump it.
type liveState struct {
	Bootstrap       string
	Infrastructure  string
	Version         string
	MachineTemplate []string
}

func (r *refusals) live(ctx context.Context, pool string) liveState {
	pn := r.in.Cluster.Pool(pool)
	var md clusterv1.MachineDeployment
	r.Must(r.in.Management.Client.Get(ctx, types.NamespacedName{Namespace: pn.Namespace, Name: pn.MachineDeployment()}, &md))
	ls := liveState{Infrastructure: md.Spec.Template.Spec.InfrastructureRef.Name, Version: md.Spec.Template.Spec.Version,
		Bootstrap: md.Spec.Template.Spec.Bootstrap.ConfigRef.Kind + "/" + md.Spec.Template.Spec.Bootstrap.ConfigRef.Name}
	var kmts unstructured.UnstructuredList
	kmts.SetGroupVersionKind(tenant.KubevirtMachineTemplateGVK.GroupVersion().WithKind("KubevirtMachineTemplateList"))
	r.Must(r.in.Management.Client.List(ctx, &kmts, client.InNamespace(pn.Namespace)))
	for _, k := range kmts.Items {
		if pn.IsMachineTemplate(k.GetName()) {
			ls.MachineTemplate = append(ls.MachineTemplate, k.GetName())
		}
	}
	return ls
}

// builtInImmutable tries to give built-in class name an image; the apiserver must refuse it
// and the class must be unchanged.
func (r *refusals) builtInImmutable(ctx context.Context, name string) {
	c := r.in.Management.Client
	class := &unstructured.Unstructured{}
	class.SetGroupVersionKind(tenant.NodeGroupClassGVK)
	r.Must(c.Get(ctx, types.NamespacedName{Name: name}, class))
	before, _, _ := unstructured.NestedMap(class.Object, "spec")
	changed := tenant.NodeGroupClass(lane.Class{Name: name, OS: osfamily.Kairos,
		Image: "registry.example.invalid/e2e/kairos@sha256:" + strings.Repeat("0", 63) + "2", KubernetesVersion: r.in.Lane.Kubernetes.Patch})
	class.Object["spec"] = changed.Object["spec"]
	err := c.Update(ctx, class)
	if errors.Is(err, context.DeadlineExceeded) {
		r.Must(err)
	}
	Expect(err).To(HaveOccurred(), "the apiserver accepted a change to the built-in class %s", name)
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the change to %s was refused, but not as invalid: %v", name, err)
	Expect(err.Error()).To(Or(ContainSubstring("immutable"), ContainSubstring("built-in")), "refusal of the change to %s", name)
	after := &unstructured.Unstructured{}
	after.SetGroupVersionKind(tenant.NodeGroupClassGVK)
	r.Must(c.Get(ctx, types.NamespacedName{Name: name}, after))
	Expect(after.Object["spec"]).To(Equal(before), "the built-in class %s changed", name)
}

// tenantCannotCreateClass acts as a member of the group the platform's RoleBinding in the
// tenant namespace grants: it can read its own apps (the credentials work), and cannot
// create a NodeGroupClass.
func (r *refusals) tenantCannotCreateClass(ctx context.Context) {
	ns := r.in.Run.Namespace()
	mgmt := r.in.Management
	var rbs rbacv1.RoleBindingList
	r.Must(mgmt.Client.List(ctx, &rbs, client.InNamespace(ns)))
	binding, group := tenantGroup(ns, rbs.Items)
	Expect(group).NotTo(BeEmpty(), "no RoleBinding of a ClusterRole in %s grants a group; the platform binds the tenant's group there", ns)
	AddReportEntry("tenant group", fmt.Sprintf("%s (RoleBinding %s/%s)", group, ns, binding))
	cfg := rest.CopyConfig(mgmt.REST)
	cfg.WrapTransport = nil // cluster.New wraps it again
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "e2e-tenant-member-" + r.in.Run.ID, Groups: []string{group, "system:authenticated"}}
	as, err := cluster.New("tenant member", cfg)
	r.Must(err)
	var apps unstructured.UnstructuredList
	apps.SetGroupVersionKind(tenant.KubernetesGVK.GroupVersion().WithKind("KubernetesList"))
	err = as.Client.List(ctx, &apps, client.InNamespace(ns))
	if errors.Is(err, context.DeadlineExceeded) {
		r.Must(err)
	}
	Expect(err).NotTo(HaveOccurred(),
		"a member of %s cannot list the Kubernetes apps of its own namespace %s: the impersonation or the binding is broken, so the refusal below would prove nothing", group, ns)
	name := "e2e-tenant-class-" + r.in.Run.ID
	err = as.Client.Create(ctx, tenant.NodeGroupClass(lane.Class{Name: name, OS: osfamily.Kairos}))
	if errors.Is(err, context.DeadlineExceeded) {
		r.Must(err)
	}
	Expect(err).To(HaveOccurred(), "a member of %s created NodeGroupClass %s", group, name)
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating a NodeGroupClass as a member of %s failed, but not as forbidden: %v", group, err)
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(tenant.NodeGroupClassGVK)
	err = mgmt.Client.Get(ctx, types.NamespacedName{Name: name}, probe)
	if !apierrors.IsNotFound(err) {
		r.Must(err)
	}
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "NodeGroupClass %s exists", name)
}

// tenantGroup is the group to act as a member of tenant namespace ns, and the RoleBinding that
// grants it: a group the tenant's own bindings of the platform's ClusterRoles name.
func tenantGroup(ns string, rbs []rbacv1.RoleBinding) (binding, group string) {
	own := false
	for _, rb := range rbs {
		// The tenant's own bindings grant the platform's ClusterRoles (cozystack v1.6.1
		// packages/apps/tenant/templates/tenant.yaml:32-35); an app's RoleBindings grant Roles it
		// renders itself (packages/apps/kubernetes/templates/dashboard-resourcemap.yaml:38-47),
		// to groups of other access levels.
		if rb.RoleRef.Kind != "ClusterRole" {
			continue
		}
		// Each binding names the groups of the tenant (<namespace>-<level>) and of every parent
		// tenant up to tenant-root (packages/library/cozy-lib/templates/_rbac.tpl:26-41, 84-96):
		// a member of the tenant's own group is the one to act as.
		for _, s := range rb.Subjects {
			if s.Kind != rbacv1.GroupKind || own {
				continue
			}
			if mine := strings.HasPrefix(s.Name, ns+"-"); mine || group == "" {
				binding, group, own = rb.Name, s.Name, mine
			}
		}
	}
	return binding, group
}
