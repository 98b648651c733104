// Package platformwatch watches the platform under the pools: the Deployments and Pods of the
// platform components a worker's join depends on (KubeVirt, CDI, the Cluster API providers,
// Kamaji, Flux). A restart is shown the moment it is seen and kept; a component unavailable when
// a pool's wait runs out is named in that pool's failure (join.Options.Platform), whose class is
// then the platform's, not the pool's.
package platformwatch

// Component is one Deployment of the platform and the labels of its Pods.
type Component struct {
	// Name is how failures and logs name it ("virt-controller").
	Name       string
	Namespace  string
	Deployment string
	// Selector are labels every Pod of the Deployment carries (its pod template's).
	Selector map[string]string
	// Container, when set, is the container whose state is read (Flux runs its controllers as
	// containers of one Pod); else every container.
	Container string
}

// Components are the platform components the join depends on, as Cozystack v1.6.1 runs them
// (the kind lane installs them, internal/install/catalog; the sim publishes a Pod of the same
// shape for each controller it runs, internal/substrate/simulated/platformpods.go). A component with
// neither a Deployment nor a Pod on the cluster is not judged (the sim runs no virt-api, no
// Kamaji Deployment).
//
//   - KubeVirt in cozy-kubevirt (packages/system/kubevirt/templates/kubevirt-cr.yaml lines 3-6):
//     virt-operator names its Deployments and pod labels kubevirt.io=<name> (kubevirt.io/kubevirt
//     v1.8.4 pkg/virt-operator/resource/generate/components/deployments.go, virt-api and
//     virt-controller; virt-handler is a DaemonSet, its Pods labelled kubevirt.io=virt-handler).
//   - CDI in cozy-kubevirt-cdi (packages/core/platform/sources/kubevirt-cdi.yaml lines 25-31):
//     cdi-deployment, pod label cdi.kubevirt.io=cdi-deployment (containerized-data-importer
//     v1.64.0 pkg/operator/resources/namespaced/controller.go lines 175-186, pkg/common/common.go
//     lines 23, 30).
//   - The Cluster API providers in cozy-cluster-api, pod labels cluster.x-k8s.io/provider and
//     control-plane: controller-manager (packages/system/capi-providers-*/files/*-components.yaml:
//     core-components.yaml lines 15118-15122 cluster-api, infrastructure-components.yaml lines
//     9814-9823 kubevirt,
//     bootstrap-components-talos.yaml lines 690-692 bootstrap-talos).
//   - Kamaji in cozy-kamaji, Deployment kamaji (internal/install/catalog), pod labels
//     app.kubernetes.io/name=kamaji and component controller-manager
//     (packages/system/kamaji/charts/kamaji/templates/_helpers.tpl lines 48-51, controller.yaml
//     line 20; the chart's kubeconfig generator shares the name label, not the component).
//   - Flux in cozy-fluxcd: one Deployment flux, pod label app.kubernetes.io/name=flux, its
//     helm-controller a container (internal/fluxinstall/manifests/fluxcd.yaml lines 7883-7907, 8103).
func Components() []Component {
	kv := func(name string) Component {
		return Component{Name: name, Namespace: "cozy-kubevirt", Deployment: name, Selector: map[string]string{"kubevirt.io": name}}
	}
	capi := func(name, deployment, provider string) Component {
		return Component{Name: name, Namespace: "cozy-cluster-api", Deployment: deployment,
			Selector: map[string]string{"cluster.x-k8s.io/provider": provider, "control-plane": "controller-manager"}}
	}
	return []Component{
		kv("virt-controller"), kv("virt-api"),
		{Name: "virt-handler", Namespace: "cozy-kubevirt", Selector: map[string]string{"kubevirt.io": "virt-handler"}},
		{Name: "cdi-controller", Namespace: "cozy-kubevirt-cdi", Deployment: "cdi-deployment", Selector: map[string]string{"cdi.kubevirt.io": "cdi-deployment"}},
		capi("capi-controller", "capi-controller-manager", "cluster-api"),
		capi("capk", "capk-controller-manager", "kubevirt"),
		capi("cabpt", "cabpt-controller-manager", "bootstrap-talos"),
		{Name: "kamaji", Namespace: "cozy-kamaji", Deployment: "kamaji", Selector: map[string]string{"app.kubernetes.io/name": "kamaji", "app.kubernetes.io/component": "controller-manager"}},
		{Name: "helm-controller", Namespace: "cozy-fluxcd", Deployment: "flux", Selector: map[string]string{"app.kubernetes.io/name": "flux"}, Container: "helm-controller"},
	}
}
