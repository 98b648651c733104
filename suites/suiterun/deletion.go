package suiterun

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/testbed"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// The deletion spec's stages, in order; they are reported under the row DeletionRow.
const (
	StageAppGone    join.Stage = "app-gone"    // nothing of the Kubernetes apps is left
	StageTenantGone join.Stage = "tenant-gone" // the Tenant app and its namespace are gone
	DeletionRow                = "tenant"
)

// DeletionSpecInput is the tenant to delete.
type DeletionSpecInput struct {
	Lifecycle
	// Keep says whether the run keeps what it made (E2E_KEEP), and why: the spec then deletes
	// nothing and is skipped. Nil: never.
	Keep func() (bool, string)
	// BeforeDelete runs once the spec is about to delete (the suite writes the cluster's
	// Cluster API tree there); nil: nothing.
	BeforeDelete func(ctx context.Context)
}

// DeletionSpec registers one spec in lane phase deletion, the last of a suite: it deletes the
// tenant's Kubernetes apps, then the Tenant, and within the lane's bound for each (timeout
// gone) nothing of theirs remains on the management cluster: no Cluster API object, KubeVirt
// VM or VMI, DataVolume, PVC, Secret or Service of an app, then no Tenant app and no tenant
// namespace. A leak is a failure of class leak naming each leftover object, how long it has
// been deleting and its finalizers; it is decided at once when only finalizers no controller
// of the platform removes hold an object, else at the bound. The suite's teardown has nothing
// left to delete afterwards but the classes.
func DeletionSpec(_ context.Context, inputGetter func() DeletionSpecInput) {
	It("deleting the Kubernetes app, then the tenant, leaves nothing of theirs on the management cluster", func(spec SpecContext) {
		in := inputGetter()
		if in.Keep != nil {
			if keep, why := in.Keep(); keep {
				_ = in.Clock.Skip(PhaseDeletion, why+": kept for inspection")
				Skip("the run keeps what it made (" + why + "): nothing is deleted")
			}
		}
		r := in.Start(spec, PhaseDeletion, "", DeletionRow)
		t := in.Tenant
		timers, err := testbed.Timeouts(in.Clock, t.Options().Lane.File, PhaseDeletion, Gone)
		r.Must(err)
		bound := timers[Gone]
		r.Stages.Bound(bound)
		ns := t.Options().Run.Namespace()
		kinds := t.Served(testbed.AppKinds)

		if in.BeforeDelete != nil {
			in.BeforeDelete(r.Ctx)
		}
		apps := t.Clusters()
		By(fmt.Sprintf("deleting the Kubernetes apps %s", appList(apps)))
		start := time.Now()
		for _, a := range apps {
			r.Must(t.DeleteApp(r.Ctx, a))
		}
		var refs []tenant.Ref
		for _, k := range kinds {
			refs = append(refs, tenant.Ref{GVK: k, Namespace: ns})
		}
		actx, cancel := context.WithTimeout(r.Ctx, bound)
		defer cancel()
		// What a component of the platform keeps by its default is a known leak: named, and
		// held to the tenant's deletion rather than the app's.
		known := map[string]string{}
		r.Must(r.gone(actx, StageAppGone, "nothing left of "+appList(apps), refs, testbed.Gone(refs, func(o *unstructured.Unstructured) bool {
			for _, a := range apps {
				if testbed.OfApp(a)(o) {
					if why := testbed.LeftByDefault(o); why != "" {
						known[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = why
						return false
					}
					return true
				}
			}
			return false
		})))
		appTook := time.Since(start)
		if len(known) > 0 {
			var lines []string
			for obj, why := range known {
				lines = append(lines, obj+": "+why)
			}
			sort.Strings(lines)
			AddReportEntry("known leak", strings.Join(lines, "; "))
			r.Logf("deletion: known leak of the platform, left after the app's deletion until the tenant's: %s", strings.Join(lines, "; "))
		}

		By("deleting the Tenant " + t.Options().Run.TenantName())
		start = time.Now()
		r.Must(t.DeleteTenant(r.Ctx))
		tenantRefs := []tenant.Ref{
			{GVK: tenant.TenantGVK, Namespace: tenant.RootNamespace, Name: t.Options().Run.TenantName()},
			{GVK: testbed.NamespaceGVK, Name: ns},
		}
		tenantRefs = append(tenantRefs, refs...)
		tctx, cancel2 := context.WithTimeout(r.Ctx, bound)
		defer cancel2()
		r.Must(r.gone(tctx, StageTenantGone, "Tenant "+t.Options().Run.TenantName()+" and namespace "+ns+" gone", tenantRefs, testbed.Gone(tenantRefs, nil)))
		tenantTook := time.Since(start)
		AddReportEntry("deletion", fmt.Sprintf("apps gone in %s, tenant gone in %s (bound %s each)", since(appTook), since(tenantTook), bound))
		r.Logf("deletion: %s gone in %s, Tenant %s and namespace %s gone in %s (bound %s each)", appList(apps), since(appTook),
			t.Options().Run.TenantName(), ns, since(tenantTook), bound)
	})
}

// gone waits for a deletion stage; running out of the bound with objects left is a leak (not a
// deadline): the wait's detail names each leftover and its finalizers.
func (r *Step) gone(ctx context.Context, stage join.Stage, what string, refs []tenant.Ref, judge tenant.Judge) error {
	err := r.Stages.Wait(ctx, r.lc.Tenant.Options().Management, stage, what, refs, judge)
	if se, ok := err.(*join.StageError); ok && se.Class == verdict.Deadline {
		se.Class = verdict.Leak
		se.Detail = fmt.Sprintf("not gone within the bound %s: %s", se.Budget, strings.TrimPrefix(se.Detail, what+": "))
	}
	return err
}

func appList(apps []tenant.Names) string {
	var out []string
	for _, a := range apps {
		out = append(out, a.String())
	}
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, ", ")
}
