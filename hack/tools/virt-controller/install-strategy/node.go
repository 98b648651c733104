package main

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/kubevirt/pkg/certificates/triple/cert"
	"kubevirt.io/kubevirt/pkg/virt-config/featuregate"

	"kubevirt.io/kubevirt/pkg/virt-operator/resource/apply"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/install"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/placement"
)

// nodeObjects is what virt-operator installs for the node side besides the Deployments: the
// virt-handler DaemonSet, every service account, (cluster) role and binding and Service of the
// strategy, and the certificates it issues before any of them starts (kubevirt.io/kubevirt v1.8.4
// pkg/virt-operator/resource/apply/core.go:400-470 createOrUpdateComponentsWithCertificates):
// its three CAs self-signed for the CA duration, every other certificate Secret signed by
// kubevirt-ca for the certificate duration (core.go:306-320, :224-260), and the kubevirt-ca
// ConfigMap's ca-bundle holding the CA (a fresh install's bundle: core.go:669-698), which it
// returns too: the operator gives the same bundle to its webhooks and APIServices (core.go:437-478).
func nodeObjects(kv *v1.KubeVirt, strategy *install.Strategy) ([]any, []byte, error) {
	var objs []any
	for _, o := range strategy.DaemonSets() {
		objs = append(objs, asCreated(kv, o.DeepCopy()))
	}
	for _, o := range strategy.ServiceAccounts() {
		objs = append(objs, o)
	}
	for _, o := range strategy.ClusterRoles() {
		objs = append(objs, o)
	}
	for _, o := range strategy.ClusterRoleBindings() {
		objs = append(objs, o)
	}
	for _, o := range strategy.Roles() {
		objs = append(objs, o)
	}
	for _, o := range strategy.RoleBindings() {
		objs = append(objs, o)
	}
	for _, o := range strategy.Services() {
		objs = append(objs, o)
	}
	self := kv.Spec.CertificateRotationStrategy.SelfSigned
	caDuration, certDuration := apply.GetCADuration(self), apply.GetCertDuration(self)
	isCA := map[string]bool{components.KubeVirtCASecretName: true, components.KubeVirtExportCASecretName: true, components.KubeVirtBackupCASecretName: true}
	cas := map[string]*corev1.Secret{}
	var leaves []*corev1.Secret
	for _, s := range strategy.CertificateSecrets() {
		s = s.DeepCopy()
		if !isCA[s.Name] {
			leaves = append(leaves, s)
			continue
		}
		if err := components.PopulateSecretWithCertificate(s, nil, caDuration); err != nil {
			return nil, nil, fmt.Errorf("the CA Secret %s: %w", s.Name, err)
		}
		cas[s.Name] = s
		objs = append(objs, s)
	}
	ca, ok := cas[components.KubeVirtCASecretName]
	if !ok {
		return nil, nil, fmt.Errorf("the strategy holds no %s Secret", components.KubeVirtCASecretName)
	}
	caCert, err := components.LoadCertificates(ca)
	if err != nil {
		return nil, nil, fmt.Errorf("the CA Secret %s: %w", ca.Name, err)
	}
	for _, s := range leaves {
		if err := components.PopulateSecretWithCertificate(s, caCert, certDuration); err != nil {
			return nil, nil, fmt.Errorf("the certificate Secret %s: %w", s.Name, err)
		}
		objs = append(objs, s)
	}
	var caBundle []byte
	seen := map[string]bool{}
	for _, cm := range strategy.ConfigMaps() {
		// the strategy lists its CA ConfigMaps twice (pkg/virt-operator/resource/generate/
		// install/strategy.go:610,625 both append NewCAConfigMaps); each is one object
		if seen[cm.Namespace+"/"+cm.Name] {
			continue
		}
		seen[cm.Namespace+"/"+cm.Name] = true
		cm = cm.DeepCopy()
		if s, ok := cas[cm.Name]; ok {
			crt, err := components.LoadCertificates(s)
			if err != nil {
				return nil, nil, fmt.Errorf("the CA Secret %s: %w", s.Name, err)
			}
			cm.Data = map[string]string{components.CABundleKey: string(cert.EncodeCertPEM(crt.Leaf))}
			if s.Name == components.KubeVirtCASecretName {
				caBundle = []byte(cm.Data[components.CABundleKey])
			}
		}
		objs = append(objs, cm)
	}
	if caBundle == nil {
		return nil, nil, fmt.Errorf("the strategy holds no %s ConfigMap", components.KubeVirtCASecretName)
	}
	return objs, caBundle, nil
}

// withCABundle are the strategy's webhook configurations and APIServices as the operator creates
// them: each with the kubevirt-ca bundle (kubevirt.io/kubevirt v1.8.4
// pkg/virt-operator/resource/apply/admissionregistration.go:164-171, :310-317,
// pkg/virt-operator/resource/apply/apiservices.go:30-33), the virt-launcher Pod mutator only when the CR enables the
// ContainerPathVolumes feature gate (admissionregistration.go:246-272; reconcile.go:1236-1248
// reads the CR's own gates).
func withCABundle(kv *v1.KubeVirt, strategy *install.Strategy, caBundle []byte) []any {
	var objs []any
	for _, w := range strategy.ValidatingWebhookConfigurations() {
		w = w.DeepCopy()
		for i := range w.Webhooks {
			w.Webhooks[i].ClientConfig.CABundle = caBundle
		}
		objs = append(objs, w)
	}
	for _, w := range strategy.MutatingWebhookConfigurations() {
		if w.Name == components.VirtLauncherPodMutatingWebhookName && !gateEnabled(kv, featuregate.ContainerPathVolumesGate) {
			continue
		}
		w = w.DeepCopy()
		for i := range w.Webhooks {
			w.Webhooks[i].ClientConfig.CABundle = caBundle
		}
		objs = append(objs, w)
	}
	for _, a := range strategy.APIServices() {
		a = a.DeepCopy()
		a.Spec.CABundle = caBundle
		objs = append(objs, a)
	}
	return objs
}

func gateEnabled(kv *v1.KubeVirt, gate string) bool {
	dc := kv.Spec.Configuration.DeveloperConfiguration
	return dc != nil && slices.Contains(dc.FeatureGates, gate)
}

// deploymentAsCreated is what virt-operator changes in a Deployment of its strategy when it
// creates it (kubevirt.io/kubevirt v1.8.4 pkg/virt-operator/resource/apply/apps.go:53-63
// syncDeployment): the KubeVirt CR's infra placement (placement.InjectPlacementMetadata,
// RequireControlPlanePreferNonWorker when the CR sets none). Its replicas (apps.go:65-81) depend
// on the cluster's Nodes when the CR sets none, and are the applier's to set.
func deploymentAsCreated(kv *v1.KubeVirt, d *appsv1.Deployment) *appsv1.Deployment {
	placement.InjectPlacementMetadata(kv.Spec.Infra, &d.Spec.Template.Spec, placement.RequireControlPlanePreferNonWorker)
	return d
}

// asCreated is what virt-operator changes in a DaemonSet of its strategy when it creates it
// (kubevirt.io/kubevirt v1.8.4 pkg/virt-operator/resource/apply/apps.go:372-400 syncDaemonSet):
// the KubeVirt CR's workloads placement (placement.InjectPlacementMetadata, AnyNode), the
// --max-devices of virt-handler when the CR sets virtualMachineInstancesPerNode
// (apps.go:442-450), and, for a DaemonSet labelled as validating migration CNs that does not
// yet, --migration-cn-types migration with its client certificate Secret's volume left out
// (apps.go:312-358). The operator's own labels and annotations (injectOperatorMetadata: its
// version, registry and install-strategy id) are not added: nothing on the node reads them.
func asCreated(kv *v1.KubeVirt, ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	spec := &ds.Spec.Template.Spec
	placement.InjectPlacementMetadata(kv.Spec.Workloads, spec, placement.AnyNode)
	if ds.Name == "virt-handler" && kv.Spec.Configuration.VirtualMachineInstancesPerNode != nil {
		spec.Containers[0].Command = append(spec.Containers[0].Command,
			"--max-devices", fmt.Sprintf("%d", *kv.Spec.Configuration.VirtualMachineInstancesPerNode))
	}
	if ds.Labels[components.SupportsMigrationCNsValidation] == "true" && !hasArg(spec.Containers[0].Args, "migration-cn-types") {
		spec.Containers[0].Args = append(spec.Containers[0].Args, "--migration-cn-types", "migration")
		var volumes []corev1.Volume
		for _, v := range spec.Volumes {
			if v.Name != components.VirtHandlerCertSecretName {
				volumes = append(volumes, v)
			}
		}
		spec.Volumes = volumes
		var mounts []corev1.VolumeMount
		for _, m := range spec.Containers[0].VolumeMounts {
			if m.Name != components.VirtHandlerCertSecretName {
				mounts = append(mounts, m)
			}
		}
		spec.Containers[0].VolumeMounts = mounts
	}
	return ds
}

func hasArg(args []string, sub string) bool {
	for _, a := range args {
		if strings.Contains(a, sub) {
			return true
		}
	}
	return false
}
