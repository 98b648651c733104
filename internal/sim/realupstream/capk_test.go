package realupstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

const infraV1 = "infrastructure.cluster.x-k8s.io/v1alpha1"

// kubevirtMachineSpec is the machine spec the Cozystack v1.6.1 Kubernetes chart renders for a
// node group sized by resources (templates/cluster.yaml lines 64-190): no SSH bootstrap check,
// the Talos image through a DataVolume, and the disk and network the guest boots with.
const kubevirtMachineSpec = `
      virtualMachineBootstrapCheck:
        checkStrategy: none
      virtualMachineTemplate:
        metadata:
          namespace: tenant-capk
        spec:
          runStrategy: Always
          dataVolumeTemplates:
          - metadata:
              name: disk-system
            spec:
              source:
                http:
                  url: https://factory.talos.dev/image/ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515/v1.13.6/openstack-amd64.raw.xz
              storage:
                resources:
                  requests:
                    storage: 20Gi
          template:
            spec:
              domain:
                cpu:
                  cores: 2
                devices:
                  disks:
                  - name: system
                    disk:
                      bus: virtio
                  interfaces:
                  - name: default
                    bridge: {}
                memory:
                  guest: 4Gi
              evictionStrategy: External
              volumes:
              - name: system
                dataVolume:
                  name: disk-system
              networks:
              - name: default
                pod: {}`

// The real CAPK v0.1.10 against the sim's management cluster: its webhook answers the apiserver,
// it reconciles the KubevirtCluster it owns and leaves alone the one Kamaji manages (as
// Cozystack renders it), it reads Cluster API's Cluster and Machine at v1beta1 through Cluster
// API's conversion webhook (the sim stores them at v1beta2), and for a Machine with bootstrap
// data it writes the VirtualMachine and the userdata Secret the VM boots with.
func TestCAPK(t *testing.T) {
	b := findBuild(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, capk, c := startController(ctx, t, b, "capk", realupstream.StartCAPK)
	create(ctx, t, c, `
apiVersion: v1
kind: Namespace
metadata:
  name: tenant-capk`)

	t.Run("its validating webhook answers the apiserver for KubevirtMachineTemplates", func(t *testing.T) {
		create(ctx, t, c, `
apiVersion: `+infraV1+`
kind: KubevirtMachineTemplate
metadata:
  name: kubernetes-kaas-md0-8c3a1f
  namespace: tenant-capk
spec:
  template:
    spec:`+indent(kubevirtMachineSpec, 4))
		tmpl, err := get(ctx, c, infraV1, "KubevirtMachineTemplate", "tenant-capk", "kubernetes-kaas-md0-8c3a1f")
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(tmpl.Object, "ssh", "spec", "template", "spec", "virtualMachineBootstrapCheck", "checkStrategy")
		err = c.Client.Update(ctx, tmpl)
		// pkg/webhookhandler/validator.go lines 36 and 102-107: the spec is immutable, said by
		// CAPK's handler, not by the CRD's schema.
		if err == nil || !strings.Contains(err.Error(), "KubevirtMachineTemplateSpec is immutable") {
			t.Fatalf("update of the template's spec: want CAPK's webhook to deny it (KubevirtMachineTemplateSpec is immutable), got %v", err)
		}
		t.Logf("denied by CAPK's webhook: %v", err)
	})

	// Two clusters: "plain" with a KubevirtCluster CAPK owns, and "kaas" as Cozystack renders it
	// (templates/cluster.yaml lines 266-288 and 504-510): its KubevirtCluster annotated
	// cluster.x-k8s.io/managed-by: kamaji, so CAPK leaves it to the Kamaji control plane
	// provider (controllers/kubevirtcluster_controller.go lines 91-94 and 273).
	create(ctx, t, c, `
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata:
  name: plain
  namespace: tenant-capk
spec:
  clusterNetwork:
    pods:
      cidrBlocks: [10.243.0.0/16]
    services:
      cidrBlocks: [10.95.0.0/16]
  infrastructureRef:
    apiVersion: `+infraV1+`
    kind: KubevirtCluster
    name: plain
    namespace: tenant-capk
---
apiVersion: `+infraV1+`
kind: KubevirtCluster
metadata:
  name: plain
  namespace: tenant-capk
spec: {}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata:
  name: kubernetes-kaas
  namespace: tenant-capk
spec:
  clusterNetwork:
    pods:
      cidrBlocks: [10.243.0.0/16]
    services:
      cidrBlocks: [10.95.0.0/16]
  controlPlaneRef:
    namespace: tenant-capk
    apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
    kind: KamajiControlPlane
    name: kubernetes-kaas
  infrastructureRef:
    apiVersion: `+infraV1+`
    kind: KubevirtCluster
    name: kubernetes-kaas
    namespace: tenant-capk
---
apiVersion: `+infraV1+`
kind: KubevirtCluster
metadata:
  name: kubernetes-kaas
  namespace: tenant-capk
  annotations:
    cluster.x-k8s.io/managed-by: kamaji
spec: {}`)

	t.Run("it reconciles the KubevirtCluster it owns, reading its Cluster at v1beta1", func(t *testing.T) {
		var kc *unstructured.Unstructured
		testkit.Eventually(ctx, t, "KubevirtCluster plain ready (CAPK)", 60*time.Second, func() (bool, string) {
			var err error
			if kc, err = get(ctx, c, infraV1, "KubevirtCluster", "tenant-capk", "plain"); err != nil {
				return false, err.Error()
			}
			return boolean(kc, "status", "ready"), "status.ready false; finalizers " + strings.Join(kc.GetFinalizers(), ",")
		}, endOf(capk.LogPath))
		// CAPK only proceeds past util.GetOwnerCluster (controllers/kubevirtcluster_controller.go
		// lines 97-104), a read of the Cluster at cluster.x-k8s.io/v1beta1, which the sim stores
		// at v1beta2: every such read goes through Cluster API's conversion webhook.
		if !contains(kc.GetFinalizers(), "kubevirtcluster.infrastructure.cluster.x-k8s.io") {
			t.Errorf("finalizers %v; CAPK adds kubevirtcluster.infrastructure.cluster.x-k8s.io (api/v1alpha1 ClusterFinalizer)", kc.GetFinalizers())
		}
		// reconcileNormal (lines 164-232): a load-balancer Service, its ClusterIP as the control
		// plane endpoint on 6443, and the nodes' SSH keys in a Secret.
		var lb corev1.Service
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-capk", Name: "plain-lb"}, &lb); err != nil {
			t.Fatalf("the load-balancer Service CAPK creates: %v", err)
		}
		host := str(kc, "spec", "controlPlaneEndpoint", "host")
		port, _, _ := unstructured.NestedInt64(kc.Object, "spec", "controlPlaneEndpoint", "port")
		if host != lb.Spec.ClusterIP || port != 6443 {
			t.Errorf("controlPlaneEndpoint %s:%d, want the Service's ClusterIP %s:6443", host, port, lb.Spec.ClusterIP)
		}
		keys := str(kc, "spec", "sshKeys", "dataSecretName")
		var ssh corev1.Secret
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-capk", Name: keys}, &ssh); err != nil || len(ssh.Data) == 0 {
			t.Errorf("ssh keys Secret %q: %v (%d keys)", keys, err, len(ssh.Data))
		}
		// And Cluster API v1.13 takes the provider's v1beta1-contract answer: the Cluster is
		// infrastructure-provisioned with the endpoint CAPK chose.
		testkit.Eventually(ctx, t, "Cluster plain infrastructure provisioned (Cluster API)", 30*time.Second, func() (bool, string) {
			cl, err := get(ctx, c, "cluster.x-k8s.io/v1beta2", "Cluster", "tenant-capk", "plain")
			if err != nil {
				return false, err.Error()
			}
			return boolean(cl, "status", "initialization", "infrastructureProvisioned") && str(cl, "spec", "controlPlaneEndpoint", "host") == host,
				"status.initialization " + str(cl, "status", "initialization")
		})
	})

	t.Run("it leaves the KubevirtCluster Kamaji manages alone", func(t *testing.T) {
		kc, err := get(ctx, c, infraV1, "KubevirtCluster", "tenant-capk", "kubernetes-kaas")
		if err != nil {
			t.Fatal(err)
		}
		if len(kc.GetFinalizers()) > 0 || boolean(kc, "status", "ready") || str(kc, "spec", "controlPlaneEndpoint", "host") != "" {
			t.Fatalf("CAPK touched the externally managed KubevirtCluster: finalizers %v, status %v, spec %v", kc.GetFinalizers(), kc.Object["status"], kc.Object["spec"])
		}
		var lb corev1.Service
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-capk", Name: "kubernetes-kaas-lb"}, &lb); !apierrors.IsNotFound(err) {
			t.Fatalf("a load-balancer Service for the externally managed cluster: %v", err)
		}
	})

	t.Run("for a Machine with bootstrap data it writes the VirtualMachine and its userdata", func(t *testing.T) {
		// What the Kamaji control plane provider does for a KubevirtCluster (clastix/
		// cluster-api-control-plane-provider-kamaji v0.19.0 controllers/
		// kamajicontrolplane_controller_cluster_patch.go lines 102-103 and 147-180): the endpoint
		// into spec.controlPlaneEndpoint and status.ready true.
		kc, err := get(ctx, c, infraV1, "KubevirtCluster", "tenant-capk", "kubernetes-kaas")
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedMap(kc.Object, map[string]any{"host": "kubernetes-kaas.tenant-capk.svc", "port": int64(6443)}, "spec", "controlPlaneEndpoint")
		if err := c.Client.Update(ctx, kc); err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(kc.Object, true, "status", "ready")
		if err := c.Client.Status().Update(ctx, kc); err != nil {
			t.Fatal(err)
		}
		create(ctx, t, c, `
apiVersion: v1
kind: Secret
metadata:
  name: kubernetes-kaas-md0-a-bootstrap-data
  namespace: tenant-capk
  labels:
    cluster.x-k8s.io/cluster-name: kubernetes-kaas
type: cluster.x-k8s.io/secret
stringData:
  value: |
    version: v1alpha1
    machine:
      type: worker
---
apiVersion: `+infraV1+`
kind: KubevirtMachine
metadata:
  name: kubernetes-kaas-md0-a
  namespace: tenant-capk
spec:`+indent(kubevirtMachineSpec, 0)+`
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata:
  name: kubernetes-kaas-md0-a
  namespace: tenant-capk
spec:
  clusterName: kubernetes-kaas
  version: v1.35.4
  bootstrap:
    dataSecretName: kubernetes-kaas-md0-a-bootstrap-data
  infrastructureRef:
    apiVersion: `+infraV1+`
    kind: KubevirtMachine
    name: kubernetes-kaas-md0-a`)
		var vm *unstructured.Unstructured
		testkit.Eventually(ctx, t, "VirtualMachine kubernetes-kaas-md0-a (CAPK)", 60*time.Second, func() (bool, string) {
			var err error
			vm, err = get(ctx, c, "kubevirt.io/v1", "VirtualMachine", "tenant-capk", "kubernetes-kaas-md0-a")
			if err != nil {
				km, kerr := get(ctx, c, infraV1, "KubevirtMachine", "tenant-capk", "kubernetes-kaas-md0-a")
				if kerr != nil {
					return false, kerr.Error()
				}
				s, r, m := condition(km, "VMProvisioned")
				return false, "KubevirtMachine VMProvisioned " + s + " " + r + " " + m
			}
			return true, ""
		}, endOf(capk.LogPath))
		// pkg/kubevirt/utils.go lines 71-116 and 141-150: named after the KubevirtMachine, the
		// cluster label, the DataVolume prefixed with the VM's name, and the bootstrap data as a
		// config drive from <data secret>-userdata.
		if vm.GetLabels()["cluster.x-k8s.io/cluster-name"] != "kubernetes-kaas" {
			t.Errorf("VM labels %v", vm.GetLabels())
		}
		dvs, _, _ := unstructured.NestedSlice(vm.Object, "spec", "dataVolumeTemplates")
		if len(dvs) != 1 || str(&unstructured.Unstructured{Object: dvs[0].(map[string]any)}, "metadata", "name") != "kubernetes-kaas-md0-a-disk-system" {
			t.Errorf("dataVolumeTemplates %v", dvs)
		}
		vols, _, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "volumes")
		var userdata string
		for _, v := range vols {
			u := &unstructured.Unstructured{Object: v.(map[string]any)}
			if s := str(u, "cloudInitConfigDrive", "secretRef", "name"); s != "" { // UserDataSecretRef, json secretRef
				userdata = s
			}
		}
		if userdata != "kubernetes-kaas-md0-a-bootstrap-data-userdata" {
			t.Fatalf("VM volumes %v: want a cloudInitConfigDrive from kubernetes-kaas-md0-a-bootstrap-data-userdata", vols)
		}
		var sec corev1.Secret
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-capk", Name: userdata}, &sec); err != nil {
			t.Fatal(err)
		}
		// No SSH user is added: the KubevirtCluster is externally managed
		// (controllers/kubevirtmachine_controller.go lines 205-215 and 571-579).
		if !strings.HasPrefix(string(sec.Data["userdata"]), "version: v1alpha1\nmachine:\n  type: worker") {
			t.Errorf("userdata is not the Machine's bootstrap data as given: %q", sec.Data["userdata"])
		}
	})
	logController(t, capk)
	logErrors(t, capk)
	if data := tailOf(capk.LogPath, 400); strings.Contains(data, "conversion webhook") {
		t.Errorf("CAPK's log mentions a conversion webhook failure:\n%s", data)
	}
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return strings.ReplaceAll(s, "\n", "\n"+pad)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
