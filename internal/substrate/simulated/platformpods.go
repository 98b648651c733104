package simulated

import (
	"fmt"

	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
)

// The namespaces, Deployments, pod labels and containers the platform runs its controllers
// with (Cozystack v1.6.1; the Cluster API providers in cozy-cluster-api, where the Cluster API
// operator installs them, docs/upstream.md). The sim publishes each real controller it runs as
// a Pod of that shape (realupstream.Supervise), so the platform watch reads the sim as it reads a
// real cluster.
var platformPods = map[string]realupstream.PlatformPod{
	// packages/system/capi-providers-infraprovider/files/infrastructure-components.yaml lines
	// 9801, 9814-9823 (pod labels), 9834 (image), 9840 (container).
	"capk": {Namespace: "cozy-cluster-api", Deployment: "capk-controller-manager",
		Labels:    map[string]string{"cluster.x-k8s.io/provider": "kubevirt", "control-plane": "controller-manager"},
		Container: "manager", Image: "quay.io/capk/capk-manager:v0.1.10"},
	// packages/system/capi-providers-bootstrap/files/bootstrap-components-talos.yaml lines 680,
	// 690-692 (pod labels), 702 (image), 708 (container).
	"cabpt": {Namespace: "cozy-cluster-api", Deployment: "cabpt-controller-manager",
		Labels:    map[string]string{"cluster.x-k8s.io/provider": "bootstrap-talos", "control-plane": "controller-manager"},
		Container: "manager", Image: "ghcr.io/siderolabs/cluster-api-talos-controller:v0.6.12"},
	// internal/fluxinstall/manifests/fluxcd.yaml lines 7883-7907 (Deployment flux, pod label
	// app.kubernetes.io/name: flux) and 8103 (container helm-controller); the sim runs its
	// helm-controller only.
	"helm-controller": {Namespace: "cozy-fluxcd", Deployment: "flux",
		Labels:    map[string]string{"app.kubernetes.io/name": "flux"},
		Container: "helm-controller", Image: "ghcr.io/fluxcd/helm-controller:v1.6.2"},
	// containerized-data-importer v1.64.0 pkg/operator/resources/namespaced/controller.go lines
	// 175-186 (Deployment, pod label and container cdi-deployment: pkg/common/common.go lines 23,
	// 30); namespace: packages/core/platform/sources/kubevirt-cdi.yaml lines 25-31.
	"cdi-controller": {Namespace: realupstream.CDINamespace, Deployment: "cdi-deployment",
		Labels:    map[string]string{"cdi.kubevirt.io": "cdi-deployment"},
		Container: "cdi-deployment", Image: "quay.io/kubevirt/cdi-controller:v1.64.0"},
}

// platformKubeVirtNamespace is where the platform runs KubeVirt (Cozystack v1.6.1
// packages/system/kubevirt/templates/kubevirt-cr.yaml lines 3-6).
const platformKubeVirtNamespace = "cozy-kubevirt"

// platformPod is the Pod shape of the controller step name runs; virt-controller's is the
// Deployment virt-operator's install strategy gives it (labels, container, image), in the
// platform's KubeVirt namespace.
func (r *realControllers) platformPod(name string) (realupstream.PlatformPod, error) {
	if name != "virt-controller" {
		p, ok := platformPods[name]
		if !ok {
			return realupstream.PlatformPod{}, fmt.Errorf("sim: no platform Pod shape for controller %s (internal/substrate/simulated/platformpods.go)", name)
		}
		return p, nil
	}
	r.mu.Lock()
	kv := r.kubevirt
	r.mu.Unlock()
	if kv == nil || kv.Controller == nil || len(kv.Controller.Spec.Template.Spec.Containers) == 0 {
		return realupstream.PlatformPod{}, fmt.Errorf("sim: virt-controller: no Deployment from virt-operator's install strategy")
	}
	d := kv.Controller
	c := d.Spec.Template.Spec.Containers[0]
	return realupstream.PlatformPod{Namespace: platformKubeVirtNamespace, Deployment: d.Name, Labels: d.Spec.Template.Labels,
		Container: c.Name, Image: c.Image, ServiceAccount: d.Spec.Template.Spec.ServiceAccountName}, nil
}
