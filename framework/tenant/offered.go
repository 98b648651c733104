package tenant

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// ApplicationDefinitionGVK is the platform's definition of an app kind (cozystack/cozystack
// main 3c780ac api/v1alpha1/applicationdefinitions_types.go, cluster-scoped); KubernetesDefinition
// names the Kubernetes app's (packages/system/kubernetes-rd/cozyrds/kubernetes.yaml:1-4, the
// same at v1.6.2). Its spec.application.openAPISchema is the Kubernetes chart's values schema,
// from which cozystack-api builds the app's kind and OpenAPI (pkg/cmd/server/start.go:324,
// openapi.go:425-429).
var ApplicationDefinitionGVK = schema.GroupVersionKind{Group: "cozystack.io", Version: "v1alpha1", Kind: "ApplicationDefinition"}

const KubernetesDefinition = "kubernetes"

// OfferedVersions are the tenant Kubernetes versions the installed platform accepts for a
// Kubernetes app: the enum of `version` in its ApplicationDefinition's openAPISchema
// (values.schema.json:203-214 at main). Whatever the lane was held to at its pinned revision,
// the platform the run installed has the last word.
func (p Platform) OfferedVersions(ctx context.Context) ([]string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ApplicationDefinitionGVK)
	if err := p.Mgmt.Client.Get(ctx, client.ObjectKey{Name: KubernetesDefinition}, u); err != nil {
		return nil, fmt.Errorf("the installed platform's ApplicationDefinition %s (cozystack.io/v1alpha1), which says the tenant versions it offers: %w", KubernetesDefinition, err)
	}
	raw, _, _ := unstructured.NestedString(u.Object, "spec", "application", "openAPISchema")
	var s struct {
		Properties struct {
			Version struct {
				Enum []string `json:"enum"`
			} `json:"version"`
		} `json:"properties"`
	}
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("ApplicationDefinition %s: spec.application.openAPISchema is not JSON: %w", KubernetesDefinition, err)
	}
	if len(s.Properties.Version.Enum) == 0 {
		return nil, fmt.Errorf("ApplicationDefinition %s: spec.application.openAPISchema has no enum of properties.version", KubernetesDefinition)
	}
	return s.Properties.Version.Enum, nil
}

// CheckOffered holds the lane's conformance clusters to the versions the installed platform
// offers (OfferedVersions): a cluster at a version it does not offer is named with the offer,
// the revision the lane was held to, and what to do.
func CheckOffered(l *lane.Lane, offered []string) error {
	var bad []string
	for _, c := range l.ConformanceClusters() {
		if !slices.Contains(offered, c.Kubernetes.Version) {
			bad = append(bad, fmt.Sprintf("cluster %s at %s", c.Name, c.Kubernetes.Version))
		}
	}
	if !slices.Contains(offered, l.Kubernetes.Version) {
		bad = append(bad, fmt.Sprintf("kubernetes.version %s (the refusal cluster's)", l.Kubernetes.Version))
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s: the installed platform offers tenant Kubernetes %s (its ApplicationDefinition %s), not what lanes-check held the lane to (%s); "+
		"install a platform that offers them or change the lane's clusters",
		l.File, strings.Join(bad, ", "), strings.Join(offered, ", "), KubernetesDefinition, l.TenantVersions())
}
