package guest_test

import (
	"context"
	"encoding/base64"
	"maps"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/sim/bootstrap"
	"github.com/cozystack/cozy-e2e/internal/sim/cdi"
	"github.com/cozystack/cozy-e2e/internal/sim/guest"
	"github.com/cozystack/cozy-e2e/internal/sim/kamaji"
	"github.com/cozystack/cozy-e2e/internal/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

const (
	ns      = "tenant-test"
	release = "kubernetes-t1"
)

// world is the management cluster with every stand-in, and one tenant cluster.
type world struct {
	mgmt   *simtest.Env
	tenant *cluster.Cluster
	env    *simenv.Env
	c      client.Client
	// serviceIP and clusterCA are the tenant apiserver's Service address and CA.
	serviceIP string
	clusterCA []byte
	// guestMemory is a pool's VM memory when not 4Gi: what internal/sim/vmsize makes of a pool
	// vmi-unschedulable targets in a sim run (these VMs are written here, not by CAPK).
	guestMemory map[string]string
}

func start(t *testing.T, fault string) *world {
	t.Helper()
	e := simtest.Start(t)
	e.Machines(t, "64Gi")
	e.CDI(t) // the real cdi-controller; cdi.Setup below plays the importer and the provisioner
	e.VirtController(t)
	tapi, tc := simtest.KamajiTenant(t, ns, release)
	env := simtest.SimEnv(t, e.Dir, fault, map[string]time.Duration{
		cdi.LatencyImport: 500 * time.Millisecond, guest.LatencyBoot: 300 * time.Millisecond, guest.LatencyJoin: 300 * time.Millisecond,
		kubevirt.LatencyStart: 100 * time.Millisecond,
	})
	var setups []func(manager.Manager) error
	for _, setup := range []func(manager.Manager, *simenv.Env) error{bootstrap.Setup, kubevirt.Setup, cdi.Setup, guest.Setup} {
		setups = append(setups, func(m manager.Manager) error { return setup(m, env) })
	}
	e.Manager(t, setups...)
	w := &world{mgmt: e, tenant: tc, env: env, c: e.Cluster.Client, guestMemory: map[string]string{}}
	ctx := t.Context()
	testkit.Must(t, w.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Namespace: "", Name: ns}}))
	kc, err := clientcmd.Write(*kubeconfig(tapi.Admin().Host, tapi.Admin().CAData, tapi.Admin().CertData, tapi.Admin().KeyData))
	testkit.Must(t, err)
	testkit.Must(t, w.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release + "-kubeconfig"},
		Data: map[string][]byte{names.KubeconfigKey: kc}}))
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef:    clusterv1.ContractVersionedObjectReference{APIGroup: names.KubevirtClusterGVK.Group, Kind: "KubevirtCluster", Name: release},
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: release + "." + ns + ".svc", Port: 6443},
		}}
	testkit.Must(t, w.c.Create(ctx, cl))
	yes := true
	cl.Status.Initialization = clusterv1.ClusterInitializationStatus{InfrastructureProvisioned: &yes, ControlPlaneInitialized: &yes}
	testkit.Must(t, w.c.Status().Update(ctx, cl))

	// What Kamaji publishes: the apiserver's Service (here leading to its loopback address) and
	// the tenant's bootstrap-token RBAC; what the chart's bootstrap-token-tenant Job writes: the
	// bootstrap token.
	u, err := url.Parse(tapi.URL)
	testkit.Must(t, err)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release, Annotations: map[string]string{simenv.LoopbackAnnotation: u.Host}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "kube-apiserver", Port: 6443}}}}
	testkit.Must(t, w.c.Create(ctx, svc))
	testkit.Must(t, kamaji.EnsureBootstrapTokenRBAC(ctx, tc.Client))
	testkit.Must(t, tc.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-" + tokenID},
		Type: corev1.SecretTypeBootstrapToken, Data: map[string][]byte{"token-id": []byte(tokenID), "token-secret": []byte(tokenSecret),
			"usage-bootstrap-authentication": []byte("true"), "auth-extra-groups": []byte(kamaji.NodeBootstrapTokenAuthGroup)}}))
	w.serviceIP, w.clusterCA = svc.Spec.ClusterIP, tapi.CA.CertPEM
	return w
}

// The tenant's bootstrap token, as the chart's talos-secrets renders it.
const (
	tokenID     = "k8sjn1"
	tokenSecret = "0123456789abcdef"
)

// talosData is a Talos worker's machine configuration as the chart's talos-reconcile Job renders
// it, with the parts a join needs: the endpoint behind the apiserver's Service, the Service's
// address among the extra host entries, the cluster CA, the bootstrap token.
func (w *world) talosData(token string) string {
	b64 := base64.StdEncoding.EncodeToString
	return "version: v1alpha1\npersist: true\nmachine:\n  type: worker\n  token: abcdef.0123456789abcdef\n" +
		"  network:\n    extraHostEntries:\n      - ip: " + w.serviceIP + "\n        aliases:\n          - " + release + "." + ns + ".svc\n" +
		"  ca:\n    crt: " + b64([]byte("talos CA")) + "\n  kubelet:\n    image: ghcr.io/siderolabs/kubelet:v1.35.4\n" +
		"cluster:\n  controlPlane:\n    endpoint: https://" + release + "." + ns + ".svc:6443\n  clusterName: " + release + "\n" +
		"  token: " + token + "\n  ca:\n    crt: " + b64(w.clusterCA) + "\n"
}

// machine drives one Machine of pool the way Cluster API and the providers do: the Machine;
// its bootstrap data (a Talos pool's written here as the Talos bootstrap provider writes it, a
// Kairos pool's by the Kairos stand-in from a KairosConfig owned by the Machine); then the
// userdata Secret and the VirtualMachine, written here as the real CAPK v0.1.10 writes them
// (the sim runs CAPK itself; these tests are about KubeVirt, CDI and the guest).
func (w *world) machine(t *testing.T, pool, name string, kairos bool) {
	t.Helper()
	w.machineWith(t, pool, name, kairos, map[string]any{"userPassword": "!"})
}

// machineWith is machine with a KairosConfig whose spec holds password (userPassword or
// userPasswordSecretRef) beside the kubeadm worker's fields.
func (w *world) machineWith(t *testing.T, pool, name string, kairos bool, password map[string]any) {
	t.Helper()
	ctx := t.Context()
	kind, gvk := "TalosConfig", names.TalosConfigGVK
	if kairos {
		kind, gvk = "KairosConfig", names.KairosConfigGVK
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			clusterv1.ClusterNameLabel: release, clusterv1.MachineDeploymentNameLabel: release + "-" + pool}},
		Spec: clusterv1.MachineSpec{ClusterName: release, Version: "v1.35.4",
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: gvk.Group, Kind: kind, Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: names.KubevirtMachineGVK.Group, Kind: "KubevirtMachine", Name: name}},
	}
	testkit.Must(t, w.c.Create(ctx, m))
	owner := []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: m.UID}}
	var secret string
	if kairos {
		spec := map[string]any{"role": "worker", "distribution": "kubeadm", "kubernetesVersion": "v1.35.4", "userName": "kairos"}
		maps.Copy(spec, password)
		cfg := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		cfg.SetGroupVersionKind(gvk)
		cfg.SetNamespace(ns)
		cfg.SetName(name)
		cfg.SetLabels(map[string]string{clusterv1.ClusterNameLabel: release})
		cfg.SetOwnerReferences(owner)
		testkit.Must(t, w.c.Create(ctx, cfg))
		w.until(t, kind+" "+name+" dataSecretName", func(ctx context.Context) (bool, error) {
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
				return false, err
			}
			secret, _, _ = unstructured.NestedString(cfg.Object, "status", "dataSecretName")
			return secret != "", nil
		})
	} else {
		// CABPT v0.6.12 for generateType none: <machine>-bootstrap-data, key value, the config
		// (under guest-join-rejected the guest itself presents a token the tenant does not hold).
		token := tokenID + "." + tokenSecret
		secret = name + "-bootstrap-data"
		testkit.Must(t, w.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret,
			Labels: map[string]string{clusterv1.ClusterNameLabel: release}}, Data: map[string][]byte{"value": []byte(w.talosData(token))}}))
	}
	m.Spec.Bootstrap.DataSecretName = &secret
	testkit.Must(t, w.c.Update(ctx, m))
	w.createVMLikeCAPK(t, pool, name, secret, kairos)
}

// createVMLikeCAPK writes <data secret>-userdata (key userdata) and the VirtualMachine as CAPK
// v0.1.10 does for a KubevirtMachine of the chart's template (controllers/
// kubevirtmachine_controller.go reconcileKubevirtBootstrapSecret; pkg/kubevirt/utils.go
// newVirtualMachineFromKubevirtMachine: the template's labels plus kubevirt.io/vm, name,
// cluster.x-k8s.io/role and cluster-name on the VM and its VMI template, the dataVolumeTemplates
// prefixed with the VM's name, the cloudinitvolume ConfigDrive from the userdata Secret).
func (w *world) createVMLikeCAPK(t *testing.T, pool, name, dataSecret string, kairos bool) {
	t.Helper()
	ctx := t.Context()
	var data corev1.Secret
	testkit.Must(t, w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: dataSecret}, &data))
	testkit.Must(t, w.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dataSecret + "-userdata",
		Labels: data.Labels}, Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"userdata": data.Data["value"]}}))
	labels := map[string]string{clusterv1.MachineDeploymentNameLabel: release + "-" + pool,
		"kubevirt.io/vm": name, "name": name, "cluster.x-k8s.io/role": "worker", clusterv1.ClusterNameLabel: release}
	source := cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "https://factory.talos.dev/image/ce4c98/v1.13.6/openstack-amd64.raw.xz"}}
	var firmware *kubevirtv1.Firmware
	if kairos {
		url := "docker://ghcr.io/cozystack/cozystack/kairos-worker-1.35"
		source = cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url}}
		firmware = &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: testkit.Ptr(false)}}}
	}
	disk := name + "-disk-system"
	always := kubevirtv1.RunStrategyAlways
	memory := "4Gi"
	if m, ok := w.guestMemory[pool]; ok {
		memory = m
	}
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &always,
			// As the chart writes it: populators off (cozystack v1.6.1 templates/cluster.yaml line 95).
			DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: disk,
				Annotations: map[string]string{"cdi.kubevirt.io/storage.usePopulator": "false"}},
				Spec: cdiv1.DataVolumeSpec{Source: &source, Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}}}}}},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						CPU:      &kubevirtv1.CPU{Cores: 2},
						Memory:   &kubevirtv1.Memory{Guest: testkit.Ptr(resource.MustParse(memory))},
						Firmware: firmware,
						Devices: kubevirtv1.Devices{
							Disks: []kubevirtv1.Disk{
								{Name: "system", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: "virtio"}}},
								{Name: "cloudinitvolume", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: "virtio"}}},
							},
							Interfaces:       []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}},
							LogSerialConsole: testkit.Ptr(true),
						},
					},
					Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
					Volumes: []kubevirtv1.Volume{
						{Name: "system", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: disk}}},
						{Name: "cloudinitvolume", VolumeSource: kubevirtv1.VolumeSource{CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{
							UserDataSecretRef: &corev1.LocalObjectReference{Name: dataSecret + "-userdata"}}}},
					},
				},
			},
		},
	}
	testkit.Must(t, w.c.Create(ctx, vm))
}

func (w *world) until(t *testing.T, what string, cond func(context.Context) (bool, error)) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	testkit.Eventually(ctx, t, what, 60*time.Second, func() (bool, string) {
		ok, err := cond(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		return ok, "not yet"
	})
	return time.Since(start)
}

// tenantNode waits for a tenant Node that match accepts, and returns it.
func (w *world) tenantNode(t *testing.T, what string, match func(corev1.Node) bool) corev1.Node {
	t.Helper()
	var found corev1.Node
	w.until(t, what, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := w.tenant.Client.List(ctx, &nodes); err != nil {
			return false, err
		}
		for _, n := range nodes.Items {
			if match(n) {
				found = n
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// A Talos Machine goes all the way: bootstrap data, VM, imported disk, VMI with its launcher,
// console, a Ready tenant Node named like the VMI; deleting the VM (as CAPK does with its
// KubevirtMachine) takes VMI and launcher away after the guest powered down. CAPK's providerID
// on the Node is the real CAPK's, checked through the sim substrate.
func TestTalosMachineJoinsAndGoesAway(t *testing.T) {
	w := start(t, "")
	name := release + "-md0-abcde-x7k2p"
	begin := time.Now()
	w.machine(t, "md0", name, false)
	ctx := t.Context()
	stamp := func(what string) { t.Logf("%-24s %s", what, time.Since(begin).Round(time.Millisecond)) }

	dv := &cdiv1.DataVolume{}
	w.until(t, "DataVolume imported", func(ctx context.Context) (bool, error) {
		err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.DataVolume(name)}, dv)
		return err == nil && dv.Status.Phase == cdiv1.Succeeded, client.IgnoreNotFound(err)
	})
	stamp("disk imported")
	if dv.Status.Progress != "100.0%" {
		t.Errorf("progress %q", dv.Status.Progress)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	w.until(t, "VMI Running", func(ctx context.Context) (bool, error) {
		err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi)
		return err == nil && vmi.Status.Phase == kubevirtv1.Running, client.IgnoreNotFound(err)
	})
	stamp("VMI running")
	pod, err := kubevirt.Launcher(ctx, w.c, vmi)
	if err != nil || pod == nil || pod.Labels[names.LabelCreatedBy] != string(vmi.UID) || !kubevirt.ConsoleLog(pod) {
		t.Fatalf("launcher %v %v", pod, err)
	}
	node := &corev1.Node{}
	w.until(t, "Node registered", func(ctx context.Context) (bool, error) {
		err := w.tenant.Client.Get(ctx, client.ObjectKey{Name: name}, node)
		return err == nil, client.IgnoreNotFound(err)
	})
	stamp("Node registered")
	// The kubelet bootstrapped with the token: its CSR, approved and signed by the tenant.
	var csrs certificatesv1.CertificateSigningRequestList
	testkit.Must(t, w.tenant.Client.List(ctx, &csrs))
	if len(csrs.Items) != 1 || csrs.Items[0].Spec.Username != "system:bootstrap:"+tokenID || len(csrs.Items[0].Status.Certificate) == 0 {
		t.Errorf("want one signed CSR by the bootstrap token, got %d: %+v", len(csrs.Items), csrs.Items)
	}
	w.until(t, "Node Ready", func(ctx context.Context) (bool, error) {
		err := w.tenant.Client.Get(ctx, client.ObjectKey{Name: name}, node)
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, err
			}
		}
		return false, err
	})
	stamp("Node Ready")
	if node.Status.NodeInfo.KubeletVersion != "v1.35.4" {
		t.Errorf("kubelet %q", node.Status.NodeInfo.KubeletVersion)
	}
	path, _ := w.env.Logs.ContainerLog(ns, pod.Name, "guest-console-log")
	consoleText, _ := os.ReadFile(path)
	for _, want := range []string{"stdout F [", "[talos] [initramfs] booting Talos", "[talos] service[kubelet](Running): Health check successful"} {
		if !strings.Contains(string(consoleText), want) {
			t.Errorf("console lacks %q:\n%s", want, consoleText)
		}
	}
	// CAPK deletes the VM when its KubevirtMachine goes.
	testkit.Must(t, w.c.Delete(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	w.until(t, "VM, VMI and launcher gone", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := w.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{names.LabelCreatedBy: string(vmi.UID)}); err != nil {
			return false, err
		}
		vmErr := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &kubevirtv1.VirtualMachine{})
		vmiErr := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &kubevirtv1.VirtualMachineInstance{})
		return len(pods.Items) == 0 && client.IgnoreNotFound(vmErr) == nil && vmErr != nil && vmiErr != nil, nil
	})
	stamp("torn down")
	consoleText, _ = os.ReadFile(path)
	if !strings.Contains(string(consoleText), "reboot: Power down") {
		t.Errorf("the console does not show the guest powering down:\n%s", consoleText)
	}
}

func kubeconfig(host string, ca, cert, key []byte) *clientcmdapiConfig {
	return newKubeconfig(host, ca, cert, key)
}
