package cptest

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/fixtures"
)

// InstallFixtureCRDs installs the fixture CRDs (fixtures/crds) of kinds through c and waits
// until each is Established. Each serves its storage version only, with no conversion webhook:
// for tests that read the storage version, as the harness does.
func InstallFixtureCRDs(t testing.TB, ctx context.Context, c client.Client, kinds ...string) {
	t.Helper()
	all, err := fixtures.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, k := range kinds {
		want[k] = true
	}
	for _, f := range all {
		if !want[f.CRD.Spec.Names.Kind] {
			continue
		}
		delete(want, f.CRD.Spec.Names.Kind)
		crd := f.CRD.DeepCopy()
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		if err := c.Create(ctx, crd); err != nil {
			t.Fatalf("creating CRD %s: %v", crd.Name, err)
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var got apiextensionsv1.CustomResourceDefinition
			if c.Get(ctx, client.ObjectKey{Name: crd.Name}, &got) != nil {
				return false, nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s never Established: %v", crd.Name, err)
		}
	}
	if len(want) > 0 {
		t.Fatalf("fixtures/crds has no CRD of kinds %v", want)
	}
}
