package realupstream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/yamldoc"
)

// Conversion is the webhook a CRD's versions convert through: a URL and the CA that signs the
// serving certificate.
type Conversion struct {
	URL      string
	CABundle []byte
}

// InstallCRDs creates each CRD, or replaces an existing one of that name (the sim's fixtures
// hold stand-in versions of some), and waits until all are Established and discovery serves
// each version they serve: Established comes first, and a client built in between (its REST
// mapper reads discovery) maps no kind to them ("no matches for kind", seen under load). A CRD
// serving more than one version gets conv as its conversion webhook when conv is set.
func InstallCRDs(ctx context.Context, c *cluster.Cluster, crds []CRD, conv *Conversion) error {
	for _, in := range crds {
		crd := in.CRD.DeepCopy()
		if conv != nil && len(crd.Spec.Versions) > 1 {
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &conv.URL, CABundle: conv.CABundle},
					ConversionReviewVersions: []string{"v1", "v1beta1"},
				},
			}
		}
		if err := createOrReplace(ctx, c, crd); err != nil {
			return fmt.Errorf("upstream: installing CRD %s (%s): %w", crd.Name, in.Source, err)
		}
	}
	return waitReady(ctx, c, crds)
}

func createOrReplace(ctx context.Context, c *cluster.Cluster, crd *apiextensionsv1.CustomResourceDefinition) error {
	err := c.Client.Create(ctx, crd)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	var live apiextensionsv1.CustomResourceDefinition
	if err := c.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, &live); err != nil {
		return err
	}
	crd.ResourceVersion = live.ResourceVersion
	return c.Client.Update(ctx, crd)
}

// waitReady waits, a minute at most, until every CRD is Established and discovery serves each
// version it serves (one discovery read per group version and pass).
func waitReady(ctx context.Context, c *cluster.Cluster, crds []CRD) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var pending []string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		served := map[string]map[string]bool{} // by group version, the resources discovery serves
		for _, in := range crds {
			var got apiextensionsv1.CustomResourceDefinition
			if err := c.Client.Get(ctx, client.ObjectKey{Name: in.CRD.Name}, &got); err != nil {
				pending = append(pending, in.CRD.Name+" (not read: "+err.Error()+")")
				continue
			}
			if !established(&got) {
				pending = append(pending, in.CRD.Name+" (not Established)")
				continue
			}
			for _, v := range in.CRD.Spec.Versions {
				if !v.Served {
					continue
				}
				gv := in.CRD.Spec.Group + "/" + v.Name
				if _, read := served[gv]; !read {
					served[gv] = discovered(c, gv)
				}
				if !served[gv][in.CRD.Spec.Names.Plural] {
					pending = append(pending, in.CRD.Name+" (discovery does not serve "+gv+")")
				}
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		sort.Strings(pending)
		return fmt.Errorf("upstream: CRDs not ready after a minute (%w): %s", err, strings.Join(pending, ", "))
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// discovered are the resources discovery serves in group version gv (none when it serves none).
func discovered(c *cluster.Cluster, gv string) map[string]bool {
	out := map[string]bool{}
	res, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil {
		return out
	}
	for _, r := range res.APIResources {
		out[r.Name] = true
	}
	return out
}

// InstanceTypes are the VirtualMachineClusterInstancetypes the platform installs (Cozystack
// v1.6.1 packages/system/kubevirt-instancetypes/templates/instancetypes.yaml, plain objects, no
// templating): the Kubernetes chart looks a node group's instanceType up among them
// (templates/cluster.yaml, talos/talos-reconcile-job.yaml).
func (b *Build) InstanceTypes() ([]*unstructured.Unstructured, error) {
	const rel = "packages/system/kubevirt-instancetypes/templates/instancetypes.yaml"
	path := b.Src("cozystack", filepath.FromSlash(rel))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w; run `make tools`", err)
	}
	docs, err := yamldoc.Split(data)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", rel, err)
	}
	var out []*unstructured.Unstructured
	for i, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("upstream: %s: document %d: %w", rel, i, err)
		}
		if u.GetKind() == "VirtualMachineClusterInstancetype" {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("upstream: %s holds no VirtualMachineClusterInstancetype", rel)
	}
	return out, nil
}
