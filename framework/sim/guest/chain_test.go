package guest_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/sim/bootstrap"
	"github.com/cozystack/cozy-e2e/framework/sim/capk"
	"github.com/cozystack/cozy-e2e/framework/sim/cdi"
	"github.com/cozystack/cozy-e2e/framework/sim/guest"
	"github.com/cozystack/cozy-e2e/framework/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/framework/sim/names"
	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/sim/simtest"
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
}

func start(t *testing.T, fault string) *world {
	t.Helper()
	e := simtest.Start(t)
	e.Machines(t, "64Gi")
	tapi, tc := simtest.Tenant(t)
	env := simtest.SimEnv(t, e.Dir, fault, map[string]time.Duration{
		cdi.LatencyImport: 500 * time.Millisecond, guest.LatencyBoot: 300 * time.Millisecond, guest.LatencyJoin: 300 * time.Millisecond,
		kubevirt.LatencyStart: 100 * time.Millisecond, kubevirt.LatencyShutdown: 100 * time.Millisecond,
	})
	var setups []func(manager.Manager) error
	for _, setup := range []func(manager.Manager, *simenv.Env) error{bootstrap.Setup, capk.Setup, kubevirt.Setup, cdi.Setup, guest.Setup} {
		setups = append(setups, func(m manager.Manager) error { return setup(m, env) })
	}
	e.Manager(t, setups...)
	w := &world{mgmt: e, tenant: tc, env: env, c: e.Cluster.Client}
	ctx := t.Context()
	must(t, w.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	kc, err := clientcmd.Write(*kubeconfig(tapi.Admin().Host, tapi.Admin().CAData, tapi.Admin().CertData, tapi.Admin().KeyData))
	must(t, err)
	must(t, w.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release + "-kubeconfig"},
		Data: map[string][]byte{names.KubeconfigKey: kc}}))
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef:    clusterv1.ContractVersionedObjectReference{APIGroup: names.KubevirtClusterGVK.Group, Kind: "KubevirtCluster", Name: release},
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: release + "." + ns + ".svc", Port: 6443},
		}}
	must(t, w.c.Create(ctx, cl))
	yes := true
	cl.Status.Initialization = clusterv1.ClusterInitializationStatus{InfrastructureProvisioned: &yes, ControlPlaneInitialized: &yes}
	must(t, w.c.Status().Update(ctx, cl))
	return w
}

// machine drives one Machine of pool the way Cluster API does: the Machine, its bootstrap config
// (owned by it), dataSecretName once the config is ready, then the KubevirtMachine.
func (w *world) machine(t *testing.T, pool, name string, kairos bool) {
	t.Helper()
	ctx := t.Context()
	kind, gvk := "TalosConfig", names.TalosConfigGVK
	spec := map[string]any{"generateType": "none", "data": "version: v1alpha1\nmachine:\n  type: worker\n  kubelet:\n    image: ghcr.io/siderolabs/kubelet:v1.35.4\ncluster:\n  controlPlane:\n    endpoint: https://" + release + "." + ns + ".svc:6443\n"}
	if kairos {
		kind, gvk = "KairosConfig", names.KairosConfigGVK
		spec = map[string]any{"role": "worker", "distribution": "kubeadm", "kubernetesVersion": "v1.35.4", "userName": "kairos",
			"userPassword": "!"}
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			clusterv1.ClusterNameLabel: release, clusterv1.MachineDeploymentNameLabel: release + "-" + pool}},
		Spec: clusterv1.MachineSpec{ClusterName: release, Version: "v1.35.4",
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: gvk.Group, Kind: kind, Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: names.KubevirtMachineGVK.Group, Kind: "KubevirtMachine", Name: name}},
	}
	must(t, w.c.Create(ctx, m))
	owner := []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: m.UID}}
	cfg := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	cfg.SetGroupVersionKind(gvk)
	cfg.SetNamespace(ns)
	cfg.SetName(name)
	cfg.SetLabels(map[string]string{clusterv1.ClusterNameLabel: release})
	cfg.SetOwnerReferences(owner)
	must(t, w.c.Create(ctx, cfg))
	secret := ""
	w.until(t, kind+" "+name+" dataSecretName", func(ctx context.Context) (bool, error) {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return false, err
		}
		secret, _, _ = unstructured.NestedString(cfg.Object, "status", "dataSecretName")
		return secret != "", nil
	})
	m.Spec.Bootstrap.DataSecretName = &secret
	must(t, w.c.Update(ctx, m))
	domain := map[string]any{"cpu": map[string]any{"cores": int64(2)}, "memory": map[string]any{"guest": "4Gi"},
		"devices": map[string]any{"disks": []any{map[string]any{"name": "system", "disk": map[string]any{"bus": "virtio"}}},
			"interfaces": []any{map[string]any{"name": "default", "bridge": map[string]any{}}}, "logSerialConsole": true}}
	source := map[string]any{"http": map[string]any{"url": "https://factory.talos.dev/image/ce4c98/v1.13.6/openstack-amd64.raw.xz"}}
	if kairos {
		domain["firmware"] = map[string]any{"bootloader": map[string]any{"efi": map[string]any{"secureBoot": false}}}
		source = map[string]any{"registry": map[string]any{"url": "docker://ghcr.io/cozystack/cozystack/kairos-worker-1.35"}}
	}
	labels := map[string]any{clusterv1.MachineDeploymentNameLabel: release + "-" + pool}
	km := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"virtualMachineBootstrapCheck": map[string]any{"checkStrategy": "none"},
		"virtualMachineTemplate": map[string]any{"metadata": map[string]any{"namespace": ns, "labels": labels},
			"spec": map[string]any{"runStrategy": "Always",
				"dataVolumeTemplates": []any{map[string]any{"metadata": map[string]any{"name": "disk-system"},
					"spec": map[string]any{"source": source, "storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "20Gi"}}}}}},
				"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{"domain": domain,
					"networks": []any{map[string]any{"name": "default", "pod": map[string]any{}}},
					"volumes":  []any{map[string]any{"name": "system", "dataVolume": map[string]any{"name": "disk-system"}}}}}}},
	}}}
	km.SetGroupVersionKind(names.KubevirtMachineGVK)
	km.SetNamespace(ns)
	km.SetName(name)
	km.SetLabels(map[string]string{clusterv1.ClusterNameLabel: release})
	km.SetOwnerReferences(owner)
	must(t, w.c.Create(ctx, km))
}

func (w *world) until(t *testing.T, what string, cond func(context.Context) (bool, error)) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return time.Since(start)
}

// A Talos Machine goes all the way: bootstrap data, VM, imported disk, VMI with its launcher,
// console, a Ready tenant Node named like the VMI with CAPK's providerID; deleting the
// KubevirtMachine takes VM, VMI and launcher away after the guest powered down.
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
	if err != nil || pod == nil || pod.Labels[names.LabelCreatedBy] != string(vmi.UID) || len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Name != "guest-console-log" {
		t.Fatalf("launcher %v %v", pod, err)
	}
	node := &corev1.Node{}
	w.until(t, "Node with providerID", func(ctx context.Context) (bool, error) {
		err := w.tenant.Client.Get(ctx, client.ObjectKey{Name: name}, node)
		return err == nil && node.Spec.ProviderID == names.ProviderID(name), client.IgnoreNotFound(err)
	})
	stamp("providerID on Node")
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
	km := &unstructured.Unstructured{}
	km.SetGroupVersionKind(names.KubevirtMachineGVK)
	must(t, w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, km))
	if id, _, _ := unstructured.NestedString(km.Object, "spec", "providerID"); id != names.ProviderID(name) {
		t.Errorf("KubevirtMachine providerID %q", id)
	}

	must(t, w.c.Delete(ctx, km))
	w.until(t, "VM, VMI and launcher gone", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := w.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"vm.kubevirt.io/name": name}); err != nil {
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

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
