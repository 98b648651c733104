package kamaji

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// publishStatus reports the control plane as Kamaji and its provider do: the TenantControlPlane
// Ready at its version with its endpoint and kubeconfig Secret, and the KamajiControlPlane
// (v1beta1 control plane contract) initialized and ready at the version, with its endpoint in
// spec.controlPlaneEndpoint for Cluster API to copy onto the Cluster.
func (k *Kamaji) publishStatus(ctx context.Context, kcp, tcp *unstructured.Unstructured, t *tenantCP, version string) error {
	u, err := url.Parse(t.api.URL)
	if err != nil {
		return err
	}
	port, _ := strconv.ParseInt(u.Port(), 10, 32)
	host := u.Hostname()

	tpatch := client.MergeFrom(tcp.DeepCopy())
	_ = unstructured.SetNestedField(tcp.Object, version, "status", "kubernetesResources", "version", "version")
	_ = unstructured.SetNestedField(tcp.Object, "Ready", "status", "kubernetesResources", "version", "status")
	_ = unstructured.SetNestedField(tcp.Object, u.Host, "status", "controlPlaneEndpoint")
	_ = unstructured.SetNestedField(tcp.Object, AdminKubeconfigSecret(kcp.GetName()), "status", "kubeconfig", "admin", "secretName")
	if err := k.client.Status().Patch(ctx, tcp, tpatch); err != nil {
		return fmt.Errorf("TenantControlPlane %s/%s status: %w", tcp.GetNamespace(), tcp.GetName(), err)
	}

	spatch := client.MergeFrom(kcp.DeepCopy())
	_ = unstructured.SetNestedField(kcp.Object, host, "spec", "controlPlaneEndpoint", "host")
	_ = unstructured.SetNestedField(kcp.Object, port, "spec", "controlPlaneEndpoint", "port")
	if err := k.client.Patch(ctx, kcp, spatch); err != nil {
		return fmt.Errorf("KamajiControlPlane %s/%s endpoint: %w", kcp.GetNamespace(), kcp.GetName(), err)
	}

	if err := k.publishInfrastructure(ctx, kcp, host, port); err != nil {
		return err
	}

	replicas, found, _ := unstructured.NestedInt64(kcp.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	ts := now().UTC().Format("2006-01-02T15:04:05Z")
	// The provider's conditions are metav1.Conditions: a satisfied one has reason Succeeded and
	// no message (controllers/conditions.go:14-49 of the provider v0.19.0).
	cond := func(typ string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": "Succeeded", "message": "", "lastTransitionTime": ts,
			"observedGeneration": kcp.GetGeneration()}
	}
	status := map[string]any{
		"initialized": true, "ready": true, "externalManagedControlPlane": true, "version": version,
		"replicas": replicas, "readyReplicas": replicas, "updatedReplicas": replicas, "unavailableReplicas": int64(0),
		"selector": "kamaji.clastix.io/name=" + kcp.GetName(),
		"conditions": []any{
			cond("Ready"), cond("TenantControlPlaneCreated"), cond("TenantControlPlaneAddressReady"), cond("KamajiControlPlaneIsReady"),
		},
	}
	if old, ok, _ := unstructured.NestedMap(kcp.Object, "status"); ok && sameStatus(old, status) {
		return nil
	}
	cpatch := client.MergeFrom(kcp.DeepCopy())
	kcp.Object["status"] = status
	if err := k.client.Status().Patch(ctx, kcp, cpatch); err != nil {
		return fmt.Errorf("KamajiControlPlane %s/%s status: %w", kcp.GetNamespace(), kcp.GetName(), err)
	}
	return nil
}

// publishInfrastructure does what the Kamaji control plane provider does for a Cluster whose
// infrastructure is a KubevirtCluster (clastix/cluster-api-control-plane-provider-kamaji v0.19.0
// controllers/kamajicontrolplane_controller_cluster_patch.go lines 83-125, KubevirtCluster at 102, and 147-182): it
// writes the control plane endpoint into the KubevirtCluster's spec.controlPlaneEndpoint and
// sets its status.ready, so Cluster API sees the Cluster's infrastructure provisioned. CAPK
// itself leaves that KubevirtCluster alone: the platform renders it annotated
// cluster.x-k8s.io/managed-by: kamaji.
func (k *Kamaji) publishInfrastructure(ctx context.Context, kcp *unstructured.Unstructured, host string, port int64) error {
	var c clusterv1.Cluster
	if err := k.client.Get(ctx, client.ObjectKey{Namespace: kcp.GetNamespace(), Name: kcp.GetName()}, &c); err != nil {
		return fmt.Errorf("reading Cluster %s/%s (whose infrastructure the control plane publishes to): %w", kcp.GetNamespace(), kcp.GetName(), err)
	}
	ref := c.Spec.InfrastructureRef
	if ref.Kind != kubevirtClusterGVK.Kind || ref.APIGroup != kubevirtClusterGVK.Group {
		return nil
	}
	kc := &unstructured.Unstructured{}
	kc.SetGroupVersionKind(kubevirtClusterGVK)
	if err := k.client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, kc); err != nil {
		return fmt.Errorf("KubevirtCluster %s/%s (the infrastructure the control plane publishes to): %w", c.Namespace, ref.Name, err)
	}
	if h, _, _ := unstructured.NestedString(kc.Object, "spec", "controlPlaneEndpoint", "host"); h != host {
		patch := client.MergeFrom(kc.DeepCopy())
		_ = unstructured.SetNestedField(kc.Object, host, "spec", "controlPlaneEndpoint", "host")
		_ = unstructured.SetNestedField(kc.Object, port, "spec", "controlPlaneEndpoint", "port")
		if err := k.client.Patch(ctx, kc, patch); err != nil {
			return fmt.Errorf("KubevirtCluster %s/%s endpoint: %w", kc.GetNamespace(), kc.GetName(), err)
		}
	}
	if ready, _, _ := unstructured.NestedBool(kc.Object, "status", "ready"); ready {
		return nil
	}
	patch := client.MergeFrom(kc.DeepCopy())
	_ = unstructured.SetNestedField(kc.Object, true, "status", "ready")
	if err := k.client.Status().Patch(ctx, kc, patch); err != nil {
		return fmt.Errorf("KubevirtCluster %s/%s status: %w", kc.GetNamespace(), kc.GetName(), err)
	}
	return nil
}

// sameStatus ignores condition timestamps, so a reconcile that changes nothing writes nothing.
func sameStatus(old, want map[string]any) bool {
	for _, k := range []string{"initialized", "ready", "version", "replicas", "readyReplicas"} {
		if fmt.Sprint(old[k]) != fmt.Sprint(want[k]) {
			return false
		}
	}
	oc, _ := old["conditions"].([]any)
	return len(oc) == len(want["conditions"].([]any))
}
