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
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

const bootstrapV1 = "bootstrap.cluster.x-k8s.io/v1alpha3"

// The real Talos bootstrap provider v0.6.12 against the sim's management cluster: its webhook
// refuses what its validator refuses, its own conversion webhook serves TalosConfig at
// v1alpha2, and given a Cluster (read at v1beta1 through Cluster API's conversion webhook), a
// Machine and a TalosConfig it writes the Talos machine configuration as the Machine's bootstrap
// data, with the Secrets it keeps per cluster: for generateType worker the secrets bundle
// (<cluster>-talos) and the Kubernetes CA (<cluster>-ca); for generateType none (what Cozystack's
// talos-reconcile Job renders) the given configuration, re-encoded, and nothing else; and for a
// control-plane Machine also the cluster's talosconfig (<cluster>-talosconfig).
func TestCABPT(t *testing.T) {
	b := findBuild(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, cabpt, c := startController(ctx, t, b, "cabpt", realupstream.StartCABPT)
	const ns = "tenant-talos"
	const clusterName = "kubernetes-talos"
	create(ctx, t, c, `
apiVersion: v1
kind: Namespace
metadata:
  name: `+ns+`
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata:
  name: `+clusterName+`
  namespace: `+ns+`
spec:
  clusterNetwork:
    pods:
      cidrBlocks: [10.243.0.0/16]
    services:
      cidrBlocks: [10.95.0.0/16]
  infrastructureRef:
    apiVersion: `+infraV1+`
    kind: KubevirtCluster
    name: `+clusterName+`
    namespace: `+ns+`
---
apiVersion: `+infraV1+`
kind: KubevirtCluster
metadata:
  name: `+clusterName+`
  namespace: `+ns+`
  annotations:
    cluster.x-k8s.io/managed-by: kamaji
spec: {}`)

	t.Run("its validating webhook refuses an unknown hostname source", func(t *testing.T) {
		err := c.Client.Create(ctx, talosConfig(ns, "bad-hostname", "worker", "", map[string]any{"hostname": map[string]any{"source": "Serial"}}))
		// api/v1alpha3/talosconfig_webhook.go lines 56-77; the CRD's schema allows any string.
		if err == nil || !strings.Contains(err.Error(), "valid values are") {
			t.Fatalf("want CABPT's webhook to refuse hostname.source Serial, got %v", err)
		}
		t.Logf("refused by CABPT's webhook: %v", err)
	})

	// The infrastructure: what the Kamaji control plane provider does for a KubevirtCluster
	// (v0.19.0 controllers/kamajicontrolplane_controller_cluster_patch.go lines 147-180); CABPT
	// waits for the Cluster's infrastructure (controllers/talosconfig_controller.go lines
	// 246-252) and takes the control plane endpoint from it.
	kc, err := get(ctx, c, infraV1, "KubevirtCluster", ns, clusterName)
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedMap(kc.Object, map[string]any{"host": clusterName + "." + ns + ".svc", "port": int64(6443)}, "spec", "controlPlaneEndpoint")
	if err := c.Client.Update(ctx, kc); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(kc.Object, true, "status", "ready")
	if err := c.Client.Status().Update(ctx, kc); err != nil {
		t.Fatal(err)
	}

	t.Run("generateType worker: generated machine configuration, the secrets bundle and the Kubernetes CA", func(t *testing.T) {
		if err := c.Client.Create(ctx, talosConfig(ns, clusterName+"-md0-w", "worker", "v1.13.6", nil)); err != nil {
			t.Fatal(err)
		}
		createMachine(ctx, t, c, ns, clusterName, clusterName+"-md0-w", false)
		data := waitBootstrapData(ctx, t, c, ns, clusterName+"-md0-w", cabpt.LogPath)
		var cfg map[string]any
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			t.Fatalf("bootstrap data is not YAML: %v", err)
		}
		u := &unstructured.Unstructured{Object: cfg}
		// From the Cluster read at v1beta1: the endpoint Cluster API copied from the
		// KubevirtCluster and the networks of spec.clusterNetwork (lines 522-556); from the
		// Machine: the kubelet of spec.version (lines 482-488).
		checks := map[string][2]string{
			"machine.type":                    {str(u, "machine", "type"), "worker"},
			"cluster.controlPlane.endpoint":   {str(u, "cluster", "controlPlane", "endpoint"), "https://" + clusterName + "." + ns + ".svc:6443"},
			"cluster.clusterName":             {str(u, "cluster", "clusterName"), clusterName},
			"cluster.network.podSubnets":      {first(u, "cluster", "network", "podSubnets"), "10.243.0.0/16"},
			"cluster.network.serviceSubnets":  {first(u, "cluster", "network", "serviceSubnets"), "10.95.0.0/16"},
			"cluster.network.dnsDomain":       {str(u, "cluster", "network", "dnsDomain"), "cluster.local"},
			"machine.kubelet.image (version)": {str(u, "machine", "kubelet", "image"), "ghcr.io/siderolabs/kubelet:v1.35.4"},
		}
		for field, v := range checks {
			if v[0] != v[1] {
				t.Errorf("%s = %q, want %q", field, v[0], v[1])
			}
		}
		if str(u, "machine", "token") == "" || str(u, "cluster", "token") == "" || str(u, "machine", "ca", "crt") == "" {
			t.Errorf("the machine token, bootstrap token and machine CA are not filled in from the secrets bundle")
		}
		bundle := secret(ctx, t, c, ns, clusterName+"-talos")
		if _, ok := bundle.Data["bundle"]; !ok || bundle.Labels["cluster.x-k8s.io/cluster-name"] != clusterName || !ownedBy(bundle, "Cluster", clusterName) {
			t.Errorf("%s-talos: keys %v labels %v owners %v; want the bundle, the cluster label and the Cluster as owner (controllers/secrets.go lines 107-130)",
				clusterName, keys(bundle), bundle.Labels, bundle.OwnerReferences)
		}
		ca := secret(ctx, t, c, ns, clusterName+"-ca")
		if len(ca.Data["tls.crt"]) == 0 || len(ca.Data["tls.key"]) == 0 {
			t.Errorf("%s-ca: keys %v; want tls.crt and tls.key (controllers/secrets.go lines 132-166)", clusterName, keys(ca))
		}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName + "-talosconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s-talosconfig for a worker: %v; CABPT writes it for control-plane configs only (controllers/secrets.go lines 206-211)", clusterName, err)
		}
	})

	t.Run("generateType none, as Cozystack's talos-reconcile Job renders it: the given configuration", func(t *testing.T) {
		given := cozystackWorkerConfig(t, clusterName, ns)
		if err := c.Client.Create(ctx, talosConfig(ns, clusterName+"-md0-n", "none", "v1.13.6", map[string]any{"data": given})); err != nil {
			t.Fatal(err)
		}
		createMachine(ctx, t, c, ns, clusterName, clusterName+"-md0-n", false)
		data := waitBootstrapData(ctx, t, c, ns, clusterName+"-md0-n", cabpt.LogPath)
		var got, want map[string]any
		if err := yaml.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(given), &want); err != nil {
			t.Fatal(err)
		}
		// userConfigs (controllers/talosconfig_controller.go lines 421-455): loaded and encoded
		// again without comments; the worker's settings pass through.
		for _, path := range [][]string{{"machine", "token"}, {"machine", "network", "extraHostEntries"}, {"machine", "install", "image"},
			{"cluster", "controlPlane", "endpoint"}, {"cluster", "token"}, {"cluster", "secret"}, {"machine", "kubelet", "extraConfig", "kubeReserved"}} {
			g, _, _ := unstructured.NestedFieldNoCopy(got, path...)
			w, _, _ := unstructured.NestedFieldNoCopy(want, path...)
			if gy, wy := yamlOf(g), yamlOf(w); gy != wy || wy == "null\n" {
				t.Errorf("%s: bootstrap data has %s, the TalosConfig gave %s", strings.Join(path, "."), gy, wy)
			}
		}
		if strings.Contains(string(data), "# ") {
			t.Errorf("bootstrap data keeps the comments of the given configuration")
		}
	})

	t.Run("a control-plane Machine also gets the cluster's talosconfig", func(t *testing.T) {
		if err := c.Client.Create(ctx, talosConfig(ns, clusterName+"-cp", "controlplane", "v1.13.6", nil)); err != nil {
			t.Fatal(err)
		}
		createMachine(ctx, t, c, ns, clusterName, clusterName+"-cp", true)
		waitBootstrapData(ctx, t, c, ns, clusterName+"-cp", cabpt.LogPath)
		var tc corev1.Secret
		testkit.Eventually(ctx, t, "Secret "+clusterName+"-talosconfig (CABPT)", 30*time.Second, func() (bool, string) {
			err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName + "-talosconfig"}, &tc)
			return err == nil, errString(err)
		}, endOf(cabpt.LogPath))
		if !strings.Contains(string(tc.Data["talosconfig"]), "context: "+clusterName) {
			t.Errorf("%s-talosconfig: %d bytes under %v, want a talosconfig for context %s", clusterName, len(tc.Data["talosconfig"]), keys(&tc), clusterName)
		}
	})

	t.Run("its conversion webhook serves TalosConfig at v1alpha2", func(t *testing.T) {
		old, err := get(ctx, c, "bootstrap.cluster.x-k8s.io/v1alpha2", "TalosConfig", ns, clusterName+"-md0-w")
		if err != nil {
			t.Fatalf("reading at v1alpha2 (CABPT's /convert): %v", err)
		}
		// api/v1alpha2/talosconfig_conversion.go: down-conversion keeps the hub's fields in
		// Cluster API's conversion-data annotation, which only the webhook writes.
		if old.GetAnnotations()["cluster.x-k8s.io/conversion-data"] == "" || str(old, "spec", "generateType") != "worker" || !boolean(old, "status", "ready") {
			t.Fatalf("v1alpha2 read: annotations %v spec %v status.ready %v", old.GetAnnotations(), old.Object["spec"], boolean(old, "status", "ready"))
		}
	})
	logController(t, cabpt)
	logErrors(t, cabpt)
}

func talosConfig(ns, name, generateType, talosVersion string, extra map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"generateType": generateType}
	if talosVersion != "" {
		spec["talosVersion"] = talosVersion
	}
	for k, v := range extra {
		spec[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(bootstrapV1)
	u.SetKind("TalosConfig")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// createMachine creates a Machine whose bootstrap is the TalosConfig of its name, as a MachineSet
// creates one from the MachineDeployment's template (Cluster API then owns the TalosConfig).
func createMachine(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, clusterName, name string, controlPlane bool) {
	t.Helper()
	labels := ""
	if controlPlane {
		labels = "\n  labels:\n    cluster.x-k8s.io/control-plane: \"\""
	}
	create(ctx, t, c, `
apiVersion: `+infraV1+`
kind: KubevirtMachine
metadata:
  name: `+name+`
  namespace: `+ns+`
spec:`+indent(kubevirtMachineSpec, 0)+`
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata:
  name: `+name+`
  namespace: `+ns+labels+`
spec:
  clusterName: `+clusterName+`
  version: v1.35.4
  bootstrap:
    configRef:
      apiVersion: `+bootstrapV1+`
      kind: TalosConfig
      name: `+name+`
  infrastructureRef:
    apiVersion: `+infraV1+`
    kind: KubevirtMachine
    name: `+name)
}

// waitBootstrapData waits for the TalosConfig to be ready and Cluster API to copy its data
// Secret's name into the Machine, and returns the data (the Secret's "value").
func waitBootstrapData(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name, log string) []byte {
	t.Helper()
	var secretName string
	testkit.Eventually(ctx, t, "bootstrap data of Machine "+name+" (CABPT, then Cluster API)", 60*time.Second, func() (bool, string) {
		tc, err := get(ctx, c, bootstrapV1, "TalosConfig", ns, name)
		if err != nil {
			return false, err.Error()
		}
		s, r, m := condition(tc, "DataSecretAvailable")
		if !boolean(tc, "status", "ready") {
			return false, "TalosConfig not ready: DataSecretAvailable " + s + " " + r + " " + m
		}
		mach, err := get(ctx, c, "cluster.x-k8s.io/v1beta1", "Machine", ns, name)
		if err != nil {
			return false, err.Error()
		}
		secretName = str(mach, "spec", "bootstrap", "dataSecretName")
		return secretName != "" && secretName == str(tc, "status", "dataSecretName"), "Machine spec.bootstrap.dataSecretName " + secretName
	}, endOf(log))
	// controllers/secrets.go lines 168-204: <owner>-bootstrap-data, key value, owned by the
	// TalosConfig, labelled with the cluster.
	if secretName != name+"-bootstrap-data" {
		t.Errorf("data Secret %s, want %s-bootstrap-data", secretName, name)
	}
	s := secret(ctx, t, c, ns, secretName)
	if !ownedBy(s, "TalosConfig", name) || s.Labels["cluster.x-k8s.io/cluster-name"] == "" {
		t.Errorf("data Secret owners %v labels %v", s.OwnerReferences, s.Labels)
	}
	if len(s.Data["value"]) == 0 {
		t.Fatalf("data Secret %s has no value (keys %v)", secretName, keys(s))
	}
	return s.Data["value"]
}
