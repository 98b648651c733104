package realupstream

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// CDIControllerBinary is CDI's controller, built by `make tools` from hack/tools/cdi-controller.
const CDIControllerBinary = "cdi-controller"

// CDINamespace is where the platform installs CDI (Cozystack v1.6.1
// packages/core/platform/sources/kubevirt-cdi.yaml lines 25-31: namespace cozy-kubevirt-cdi); the
// controller reads it from its service account's namespace file and keeps its leader election
// lease there (containerized-data-importer v1.64.0 pkg/util/util.go lines 57-68,
// cmd/cdi-controller/controller.go lines 165, 196-200).
const CDINamespace = "cozy-kubevirt-cdi"

// cdiCRDKeys are the CRDs cdi-operator installs: the eleven of its cluster factory
// (pkg/operator/resources/cluster/factory.go lines 56-69) and the CDI kind itself, from its own
// resources (pkg/operator/resources/operator/operator.go line 402). All come from the YAML map
// CDICRDs in pkg/operator/resources/crds_generated.go.
var cdiCRDKeys = []string{
	"cdi", "datavolume", "cdiconfig", "storageprofile", "datasource", "dataimportcron", "objecttransfer",
	"volumeimportsource", "volumeuploadsource", "volumeclonesource", "ovirtvolumepopulator", "openstackvolumepopulator",
}

// CDICRDs are CDI's CRDs as cdi-operator v1.64.0 makes them.
func (b *Build) CDICRDs() ([]CRD, error) {
	const rel = "pkg/operator/resources/crds_generated.go"
	comp := b.Component("cdi")
	path := b.Src("cdi", filepath.FromSlash(rel))
	var out []CRD
	for _, key := range cdiCRDKeys {
		source := fmt.Sprintf("%s@%s %s (CDICRDs[%q])", comp.Module, comp.Version, rel, key)
		text, err := goMapString(path, key)
		if err != nil {
			return nil, fmt.Errorf("upstream: %s: %w", source, err)
		}
		crds, err := decodeCRDs([]byte(text))
		if err != nil || len(crds) != 1 {
			return nil, fmt.Errorf("upstream: %s: want one CRD (%v)", source, err)
		}
		out = append(out, CRD{Source: source, CRD: crds[0]})
	}
	return out, nil
}

// CDIImages are the images cdi-operator v1.64.0 hands the controller, as the platform's
// kubevirt-cdi-operator Deployment names them (Cozystack v1.6.1
// packages/system/kubevirt-cdi-operator/templates/cdi-operator.yaml lines 5742-5759).
var CDIImages = struct{ Importer, Cloner, UploadServer, OvirtPopulator string }{
	Importer:       "quay.io/kubevirt/cdi-importer:v1.64.0",
	Cloner:         "quay.io/kubevirt/cdi-cloner:v1.64.0",
	UploadServer:   "quay.io/kubevirt/cdi-uploadserver:v1.64.0",
	OvirtPopulator: "quay.io/kubevirt/cdi-importer:v1.64.0",
}

// cdiEnv is the controller's environment as cdi-operator writes it into the cdi-deployment
// (pkg/operator/resources/namespaced/controller.go lines 205-247: the images, the upload proxy's
// Service name cdi-uploadproxy, the pull policy of the CDI CR, IfNotPresent on the platform; the
// INSTALLER_* variables are empty there, the platform's CDI CR carrying no part-of or version
// label). The controller refuses to start without the first five
// (cmd/cdi-controller/controller.go lines 109-113).
func cdiEnv() []string {
	return []string{
		"IMPORTER_IMAGE=" + CDIImages.Importer,
		"CLONER_IMAGE=" + CDIImages.Cloner,
		"UPLOADSERVER_IMAGE=" + CDIImages.UploadServer,
		"UPLOADPROXY_SERVICE=cdi-uploadproxy",
		"OVIRT_POPULATOR_IMAGE=" + CDIImages.OvirtPopulator,
		"PULL_POLICY=IfNotPresent",
	}
}

// cdiCR is the CDI custom resource of the platform's kubevirt-cdi package (Cozystack v1.6.1
// packages/system/kubevirt-cdi/templates/cdi-cr.yaml lines 1-23 with values.yaml:
// cloneStrategyOverride csi-clone, no uploadProxyURL), annotated as cdi-operator annotates the CR
// it owns (cdi.kubevirt.io/configAuthority, pkg/operator/controller/callbacks.go line 327): the
// controller then copies spec.config into the CDIConfig it creates
// (pkg/controller/config-controller.go lines 133-156, 536-560).
const cdiCR = `apiVersion: cdi.kubevirt.io/v1beta1
kind: CDI
metadata:
  name: cdi
  annotations:
    cdi.kubevirt.io/configAuthority: ""
spec:
  cloneStrategyOverride: csi-clone
  config:
    featureGates:
    - HonorWaitForFirstConsumer
    - ExpandDisks
  imagePullPolicy: IfNotPresent
  infra:
    nodeSelector:
      kubernetes.io/os: linux
    tolerations:
    - key: CriticalAddonsOnly
      operator: Exists
  workload:
    nodeSelector:
      kubernetes.io/os: linux
`

// CDIConfigGVR is the CDIConfig resource; the controller writes its status.
var CDIConfigGVR = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "cdiconfigs"}

// StartCDIController creates the platform's CDI CR and CDI's namespace, and runs cdi-controller
// against the apiserver of o.Kubeconfig until its configuration controller has written the
// CDIConfig's status (cdi-controller serves no health endpoint: its readiness probe is a file,
// pkg/operator/resources/namespaced/controller.go lines 248-259). CDI's CRDs are installed
// unless o.CRDsInstalled.
//
// The controller binds its metrics server to :8443 on every interface, with no flag to move it
// (cmd/cdi-controller/controller.go lines 203-211), and reads its token keys from
// /var/run/cdi/token/keys (pkg/controller/clone-controller.go lines 43-51); it runs in network
// and mount namespaces of its own (see isolate), so worlds side by side do not collide and
// nothing is written outside o.Dir; with o.PodMetricsDir its dials to pod IPs reach the sim's pod
// network (podnet.go), where the importer's progress is served.
func StartCDIController(ctx context.Context, b *Build, c *cluster.Cluster, o Options) (*Controller, error) {
	crds, err := b.CDICRDs()
	if err != nil {
		return nil, err
	}
	if !o.CRDsInstalled {
		if err := InstallCRDs(ctx, c, crds, nil); err != nil {
			return nil, err
		}
	}
	if err := createCDIObjects(ctx, c); err != nil {
		return nil, err
	}
	ctl, err := newController("cdi-controller", b.Path(CDIControllerBinary), o)
	if err != nil {
		return nil, err
	}
	if err := writeTokenKeys(filepath.Join(o.Dir, "token-keys")); err != nil {
		return nil, err
	}
	// -v=1: the VERBOSITY the platform's operator Deployment sets (cdi-operator.yaml line 5757),
	// passed as the container's only argument (pkg/operator/resources/utils/common.go line 59).
	args := append([]string{"-v=1", "-kubeconfig=" + o.Kubeconfig}, o.ExtraArgs...)
	iso := &isolation{
		Dir: filepath.Join(o.Dir, "ns"), Kubeconfig: o.Kubeconfig, PodCIDR: o.PodCIDR, PodMetricsDir: o.PodMetricsDir, RealPodCIDRs: o.RealPodCIDRs,
		Files: map[string]string{
			"/run/cdi/token/keys/id_rsa":                          filepath.Join(o.Dir, "token-keys", "id_rsa"),
			"/run/cdi/token/keys/id_rsa.pub":                      filepath.Join(o.Dir, "token-keys", "id_rsa.pub"),
			"/run/secrets/kubernetes.io/serviceaccount/namespace": filepath.Join(o.Dir, "token-keys", "namespace"),
		},
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "token-keys", "namespace"), []byte(CDINamespace), 0o600); err != nil {
		return nil, err
	}
	if ctl.Args, err = iso.wrap(ctl, cdiEnv(), args); err != nil {
		return nil, err
	}
	ready := func(ctx context.Context) error { return cdiConfigured(ctx, c) }
	if err := iso.start(ctx, ctl, ready); err != nil {
		return nil, err
	}
	// A restart runs in namespaces of its own again; CDI's leader election lease
	// (controller.go lines 196-200) is taken back by the new process.
	ctl.restart = func(ctx context.Context) error { return iso.restart(ctx, ctl, ready) }
	return ctl, nil
}

// createCDIObjects creates CDI's namespace and the platform's CDI CR.
func createCDIObjects(ctx context.Context, c *cluster.Cluster) error {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": CDINamespace}}}
	cr := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(cdiCR), &cr.Object); err != nil {
		return fmt.Errorf("upstream: the platform's CDI CR: %w", err)
	}
	for _, o := range []client.Object{ns, cr} {
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("upstream: creating %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	return nil
}

// cdiConfigured: the CDIConfig "config" exists, carries the platform's feature gates, and its
// status has the filesystem overhead the configuration controller computes
// (pkg/controller/config-controller.go lines 78-129).
func cdiConfigured(ctx context.Context, c *cluster.Cluster) error {
	cfg := &unstructured.Unstructured{}
	cfg.SetGroupVersionKind(CDIConfigGVR.GroupVersion().WithKind("CDIConfig"))
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "config"}, cfg); err != nil {
		return err
	}
	gates, _, _ := unstructured.NestedStringSlice(cfg.Object, "spec", "featureGates")
	if !strings.Contains(strings.Join(gates, ","), "HonorWaitForFirstConsumer") {
		return fmt.Errorf("CDIConfig config: spec.featureGates %v lacks the CDI CR's", gates)
	}
	if _, ok, _ := unstructured.NestedMap(cfg.Object, "status", "filesystemOverhead"); !ok {
		return fmt.Errorf("CDIConfig config: no status.filesystemOverhead yet")
	}
	return nil
}

// writeTokenKeys writes the key pair the controller's clone controllers load at start (id_rsa,
// id_rsa.pub; cdi-operator keeps them in Secret cdi-api-signing-key). No clone runs in the sim;
// any RSA pair serves.
func writeTokenKeys(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "id_rsa.pub")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(dir, "id_rsa"), priv, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "id_rsa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

// RealNodeCDI changes the platform's CDI CR as a lane with a real Node does, through the CR's own
// fields only, and waits until cdi-controller took it:
//   - spec.config.insecureRegistries lists registry (host:port), the local registry, which serves
//     plain HTTP: an importer then reaches it without verifying TLS and falls back to HTTP (CDI
//     v1.64.0 pkg/controller/import-controller.go:690-706 matches the endpoint's host:port
//     exactly; the importer's transport sets DockerInsecureSkipTLSVerify,
//     pkg/importer/transport.go:51-74). The configuration controller copies spec.config into
//     the CDIConfig, which the import controller reads
//     (pkg/controller/config-controller.go:143-153; it watches the CDI CR, :721).
//   - spec.workload.tolerations tolerates taint (the real Node's): importer Pods take the
//     workload placement (pkg/controller/common/util.go:782-793, import-controller.go:959-961),
//     so an importer may run on the real Node, where its claim's volume is; no node selector
//     is added, and the importers of the kwok Nodes' volumes stay on those.
//
// The platform's CDI CR lists no registry and no toleration; the lane says so.
func RealNodeCDI(ctx context.Context, c *cluster.Cluster, registry, taint string) error {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(schema.GroupVersionKind{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "CDI"})
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "cdi"}, cr); err != nil {
		return fmt.Errorf("upstream: the CDI CR: %w", err)
	}
	patch := client.MergeFrom(cr.DeepCopy())
	regs, _, _ := unstructured.NestedStringSlice(cr.Object, "spec", "config", "insecureRegistries")
	if !slices.Contains(regs, registry) {
		regs = append(regs, registry)
	}
	if err := unstructured.SetNestedStringSlice(cr.Object, regs, "spec", "config", "insecureRegistries"); err != nil {
		return err
	}
	tols, _, _ := unstructured.NestedSlice(cr.Object, "spec", "workload", "tolerations")
	tol := map[string]any{"key": taint, "operator": "Exists", "effect": "NoSchedule"}
	if !slices.ContainsFunc(tols, func(t any) bool { return reflect.DeepEqual(t, tol) }) {
		tols = append(tols, tol)
	}
	if err := unstructured.SetNestedSlice(cr.Object, tols, "spec", "workload", "tolerations"); err != nil {
		return err
	}
	if err := c.Client.Patch(ctx, cr, patch); err != nil {
		return fmt.Errorf("upstream: the CDI CR for the real Node: %w", err)
	}
	for {
		cfg := &unstructured.Unstructured{}
		cfg.SetGroupVersionKind(CDIConfigGVR.GroupVersion().WithKind("CDIConfig"))
		err := c.Client.Get(ctx, client.ObjectKey{Name: "config"}, cfg)
		got, _, _ := unstructured.NestedStringSlice(cfg.Object, "spec", "insecureRegistries")
		if err == nil && slices.Contains(got, registry) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("upstream: waiting for cdi-controller to copy the CDI CR's insecureRegistries into CDIConfig config (it has %v, %v): %w", got, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
