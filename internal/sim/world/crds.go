package world

import (
	"context"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/cozystack/cozy-e2e/fixtures"
	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// installCRDs creates every fixture CRD but the replaced ones and waits until each is
// Established. A CRD serving more
// than one version whose kinds convert through a hub in the manager's scheme (Cluster API's)
// gets the in-process conversion webhook, so every served version reads correctly.
func installCRDs(ctx context.Context, c *cluster.Cluster, s *webhookServing, replaced []string) error {
	all, err := fixtures.CRDs()
	if err != nil {
		return err
	}
	skip := map[string]bool{}
	for _, n := range replaced {
		skip[n] = true
	}
	var crds []fixtures.CRD
	for _, f := range all {
		if !skip[f.CRD.Name] {
			crds = append(crds, f)
		}
	}
	scheme := managerScheme()
	for _, f := range crds {
		crd := f.CRD.DeepCopy()
		if len(crd.Spec.Versions) > 1 {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storageVersion(crd), Kind: crd.Spec.Names.Kind}
			obj, err := scheme.New(gvk)
			convertible := false
			if err == nil {
				convertible, _ = conversion.IsConvertible(scheme, obj)
			}
			if !convertible {
				// Not a kind the sim converts (a provider CRD kept as written): the file's own
				// conversion strategy stands.
				if err := create(ctx, c, f.File, crd); err != nil {
					return err
				}
				continue
			}
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(s.URL("/convert")), CABundle: s.ca.CertPEM},
					ConversionReviewVersions: []string{"v1"},
				},
			}
		}
		if err := create(ctx, c, f.File, crd); err != nil {
			return err
		}
	}
	var pending []string
	err = wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		var list apiextensionsv1.CustomResourceDefinitionList
		if err := c.Client.List(ctx, &list); err != nil {
			return false, nil
		}
		established := map[string]bool{}
		for _, crd := range list.Items {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established[crd.Name] = true
				}
			}
		}
		pending = pending[:0]
		for _, f := range crds {
			if !established[f.CRD.Name] {
				pending = append(pending, f.CRD.Name)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("world: CRDs not Established (%w): %s", err, strings.Join(pending, ", "))
	}
	return nil
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return crd.Spec.Versions[0].Name
}

func create(ctx context.Context, c *cluster.Cluster, file string, crd *apiextensionsv1.CustomResourceDefinition) error {
	if err := c.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: installing %s: %w", file, crd.Name, err)
	}
	return nil
}
