package simtest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Every provider CRD the stand-ins serve installs on the real apiserver, and the Cluster API
// contract labels the Machine controller resolves versions with are on it.
func TestProviderCRDsInstallWithTheirContractLabels(t *testing.T) {
	e := Start(t)
	for name, label := range map[string]string{
		"kubevirtmachines.infrastructure.cluster.x-k8s.io":         "cluster.x-k8s.io/v1beta1=v1alpha1",
		"kubevirtclusters.infrastructure.cluster.x-k8s.io":         "cluster.x-k8s.io/v1beta1=v1alpha1",
		"talosconfigs.bootstrap.cluster.x-k8s.io":                  "cluster.x-k8s.io/v1beta1=v1alpha3",
		"kairosconfigs.bootstrap.cluster.x-k8s.io":                 "cluster.x-k8s.io/v1beta2=v1beta2",
		"virtualmachines.kubevirt.io":                              "",
		"virtualmachineinstances.kubevirt.io":                      "",
		"datavolumes.cdi.kubevirt.io":                              "",
		"kairosconfigtemplates.bootstrap.cluster.x-k8s.io":         "cluster.x-k8s.io/v1beta2=v1beta2",
		"talosconfigtemplates.bootstrap.cluster.x-k8s.io":          "cluster.x-k8s.io/v1beta1=v1alpha3",
		"kubevirtmachinetemplates.infrastructure.cluster.x-k8s.io": "cluster.x-k8s.io/v1beta1=v1alpha1",
	} {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := e.Cluster.Client.Get(t.Context(), client.ObjectKey{Name: name}, crd); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if label == "" {
			continue
		}
		k, v, _ := strings.Cut(label, "=")
		if got := crd.GetLabels()[k]; got != v {
			t.Errorf("%s: label %s=%q, want %q", name, k, got, v)
		}
	}
}
