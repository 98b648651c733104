package cptest

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/fixtures"
	"github.com/cozystack/cozy-e2e/internal/testkit"
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
		Established(ctx, t, c, crd.Name, time.Minute)
	}
	if len(want) > 0 {
		t.Fatalf("fixtures/crds has no CRD of kinds %v", want)
	}
}

// Established waits up to timeout until CRD name is Established.
func Established(ctx context.Context, t testing.TB, c client.Client, name string, timeout time.Duration) {
	t.Helper()
	testkit.Eventually(ctx, t, "CRD "+name+" Established", timeout, func() (bool, string) {
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &got); err != nil {
			return false, err.Error()
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %v", got.Status.Conditions)
	})
}
