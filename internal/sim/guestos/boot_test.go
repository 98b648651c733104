package guestos

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/kamaji"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The worker disk's guest joins a tenant control plane by itself: booted by QEMU under TCG with
// a config drive holding a Cozystack worker's machine configuration, its OS stand-in starts
// containerd and the real kubelet, which takes the bootstrap token through TLS bootstrap, gets
// its certificate signed by the tenant's kube-controller-manager and registers its Node Ready,
// under the name the config drive's metadata gives, with the firmware's UUID and the guest
// kernel's version. Then a pod pinned to that Node runs there: the guest's containerd pulls its
// sandbox's pause image and the workload image by digest from a local registry, through the
// machine configuration's registry mirrors. QEMU's user network plays the pod network: the
// guest reaches this host's loopback at 10.0.2.2.
func TestTheGuestJoinsByItselfUnderQEMU(t *testing.T) {
	disk, qemu := joinDisk(t)
	tools := cptest.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	api := startTenant(ctx, t, tools, dir)
	workload, mirror := startRegistry(ctx, t, dir)
	const uuid, host = "4a2c9c1e-0000-4000-8000-00000000c0de", "kubernetes-t1-md0-abcde"
	iso := configDrive(t, dir, api, uuid, host, mirror)
	consolePath := boot(ctx, t, qemu, dir, disk, iso, uuid)

	cs, err := kubernetes.NewForConfig(api.Admin())
	testkit.Must(t, err)
	start := time.Now()
	marks := newMarks(consolePath, start, "Run /init as init process", "cozy-e2e guest: init started", "random: crng init done",
		"cozy-e2e guest: eth0", "machine config loaded", "service[cri](Running): Started task", "service[kubelet](Running): Started task",
		"service[kubelet](Running): Health check successful")
	defer func() { t.Logf("where the time went, from QEMU's start:\n%s", marks.String()) }()
	var n *corev1.Node
	for n == nil || !ready(n) {
		select {
		case <-ctx.Done():
			t.Fatalf("no Ready Node %s: %v", host, err)
		case <-time.After(2 * time.Second):
		}
		marks.scan()
		if n, err = cs.CoreV1().Nodes().Get(ctx, host, metav1.GetOptions{}); err == nil {
			marks.at("the Node registered", time.Since(start))
		} else {
			n = nil
		}
	}
	marks.at("the Node Ready", time.Since(start))
	info := n.Status.NodeInfo
	if info.SystemUUID != uuid || info.KubeletVersion != "v1.35.6" {
		t.Errorf("Node %s: systemUUID %q kubelet %q, want the firmware's %s and v1.35.6", n.Name, info.SystemUUID, info.KubeletVersion, uuid)
	}
	if b, _ := os.ReadFile(consolePath); !strings.Contains(string(b), "Linux version "+info.KernelVersion+" ") {
		t.Errorf("the console never printed the Node's kernel %s at boot", info.KernelVersion)
	}
	// The kubelet's own TLS bootstrap: a CSR from the bootstrap token, approved and signed.
	csrs, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	testkit.Must(t, err)
	signed := false
	for _, csr := range csrs.Items {
		signed = signed || (csr.Spec.Username == "system:bootstrap:k8sjn1" && csr.Spec.SignerName == "kubernetes.io/kube-apiserver-client-kubelet" && len(csr.Status.Certificate) > 0)
	}
	if !signed {
		t.Errorf("no CSR of the bootstrap token signed: %d CSRs", len(csrs.Items))
	}
	runPod(ctx, t, cs, host, workload)
	marks.at("the workload pod Running", time.Since(start))
}

// startRegistry serves the pause image and the workload image on a local registry, and returns
// the workload by digest and the registry as the guest reaches it.
func startRegistry(ctx context.Context, t *testing.T, dir string) (workload, mirror string) {
	tools, err := node.FindTools()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err, "; run `make node-tools`")
	}
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	testkit.Must(t, err)
	reg, err := node.StartRegistry(log)
	testkit.Must(t, err)
	t.Cleanup(func() {
		reg.Stop()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("registry log:\n%s", b)
		}
	})
	pause, err := node.PauseImage(tools)
	testkit.Must(t, err)
	_, err = reg.Push(ctx, node.PauseRef, pause)
	testkit.Must(t, err)
	img, err := node.WorkloadImage()
	testkit.Must(t, err)
	d, err := reg.Push(ctx, node.WorkloadRef, img)
	testkit.Must(t, err)
	return node.WorkloadRepo + "@" + d.String(), "http://10.0.2.2" + reg.Host[strings.LastIndex(reg.Host, ":"):]
}

// runPod runs image in a pod pinned to nodeName, and waits for it to run.
func runPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, nodeName, image string) {
	pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "workload"},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "workload", Image: image}}}}, metav1.CreateOptions{})
	testkit.Must(t, err)
	for pod.Status.Phase != corev1.PodRunning {
		select {
		case <-ctx.Done():
			ev, _ := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
			var b strings.Builder
			for _, e := range ev.Items {
				fmt.Fprintf(&b, "  %s %s: %s\n", e.Reason, e.InvolvedObject.Name, e.Message)
			}
			t.Fatalf("pod %s on Node %s is %s, not Running; events:\n%s", pod.Name, nodeName, pod.Status.Phase, b.String())
		case <-time.After(time.Second):
		}
		if pod, err = cs.CoreV1().Pods("default").Get(ctx, "workload", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := pod.Status.ContainerStatuses; len(got) != 1 || !strings.HasSuffix(got[0].ImageID, image[strings.Index(image, "@")+1:]) {
		t.Errorf("the workload's container status %+v does not name the image %s", got, image)
	}
}

// joinDisk is the worker-disk-join image's disk (make node-images) and QEMU; missing, the test
// fails under CI and skips elsewhere, naming what to install or build.
func joinDisk(t *testing.T) (disk, qemu string) {
	t.Helper()
	imgs, err := node.FindImages()
	var missing []string
	if err != nil {
		missing = append(missing, err.Error())
	}
	qemu, qerr := exec.LookPath("qemu-system-x86_64")
	_, xerr := exec.LookPath("xorriso")
	if qerr != nil || xerr != nil {
		missing = append(missing, "qemu-system-x86_64 or xorriso: apt-get install -y qemu-system-x86 xorriso")
	}
	if len(missing) > 0 {
		testkit.Unavailable(t, strings.Join(missing, "; "))
	}
	return imgs.WorkerDiskJoinFile(), qemu
}

// startTenant runs a tenant control plane as Kamaji's stand-in sets it up for a Talos worker:
// kube-apiserver with bootstrap tokens, its certificate for the Service's name, the
// controller-manager that approves and signs node CSRs, the bootstrap token and its RBAC.
func startTenant(ctx context.Context, t *testing.T, tools controlplane.Tools, dir string) *controlplane.APIServer {
	etcd, err := controlplane.StartEtcd(ctx, tools, dir)
	testkit.Must(t, err)
	t.Cleanup(func() { etcd.Stop(5 * time.Second) })
	api, err := controlplane.StartAPIServer(ctx, tools, controlplane.APIServerOptions{Name: "tenant", Dir: dir, EtcdURL: etcd.ClientURL,
		ServiceCIDR: "10.95.0.0/16", SANs: []string{"kubernetes-t1.tenant-test.svc"}, ExtraArgs: []string{"--enable-bootstrap-token-auth=true"}})
	testkit.Must(t, err)
	t.Cleanup(func() { api.Stop(10 * time.Second) })
	kcm, err := controlplane.StartControllerManager(ctx, tools, api, controlplane.ControllerManagerOptions{Dir: dir,
		Controllers: kamaji.TenantControllers})
	testkit.Must(t, err)
	t.Cleanup(func() { kcm.Stop(5 * time.Second) })
	c, err := client.New(api.Admin(), client.Options{})
	testkit.Must(t, err)
	testkit.Must(t, kamaji.EnsureBootstrapTokenRBAC(ctx, c))
	testkit.Must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-k8sjn1"},
		Type: corev1.SecretTypeBootstrapToken, StringData: map[string]string{"token-id": "k8sjn1", "token-secret": "0123456789abcdef",
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true", "auth-extra-groups": kamaji.NodeBootstrapTokenAuthGroup}}))
	return api
}

// configDrive is the config drive KubeVirt would build for the worker: testdata/worker.yaml
// with the tenant's CA and port, its Service name at 10.0.2.2 (QEMU's user network answers there
// from this host's loopback), mirror as the registry of registry.k8s.io and the workload's
// registry, and the metadata's uuid and hostname.
func configDrive(t *testing.T, dir string, api *controlplane.APIServer, uuid, host, mirror string) string {
	port := api.URL[strings.LastIndex(api.URL, ":")+1:]
	mirrors := "machine:\n  registries:\n    mirrors:\n"
	for _, r := range []string{"registry.k8s.io", strings.Split(node.WorkloadRepo, "/")[0]} {
		mirrors += "      " + r + ":\n        endpoints: [" + mirror + "]\n        skipFallback: true\n"
	}
	ud := string(worker(t, "endpoint: https://kubernetes-t1.tenant-test.svc:6443", "endpoint: https://kubernetes-t1.tenant-test.svc:"+port,
		"ip: 10.96.12.34", "ip: 10.0.2.2", "machine:\n", mirrors))
	lines := strings.Split(ud, "\n")
	for i := range lines {
		if lines[i] == "  ca:" && i+1 < len(lines) && strings.Contains(strings.Join(lines[:i], "\n"), "\ncluster:") {
			lines[i+1] = "    crt: " + base64.StdEncoding.EncodeToString(api.CA.CertPEM)
		}
	}
	cd := filepath.Join(dir, "cd", "openstack", "latest")
	testkit.Must(t, os.MkdirAll(cd, 0o755))
	testkit.Must(t, os.WriteFile(filepath.Join(cd, "user_data"), []byte(strings.Join(lines, "\n")), 0o644))
	testkit.Must(t, os.WriteFile(filepath.Join(cd, "meta_data.json"), []byte(fmt.Sprintf(`{"uuid":%q,"hostname":%q}`, uuid, host)), 0o644))
	iso := filepath.Join(dir, "config.iso")
	if out, err := exec.Command("xorriso", "-as", "mkisofs", "-V", "config-2", "-J", "-R", "-o", iso, filepath.Join(dir, "cd")).CombinedOutput(); err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	return iso
}

// boot starts QEMU under TCG on a copy of the disk with the config drive, virtio-rng and a user
// network, and returns the file its serial console goes to (logged when the test ends).
func boot(ctx context.Context, t *testing.T, qemu, dir, disk, iso, uuid string) string {
	img := filepath.Join(dir, "disk.img")
	b, err := os.ReadFile(disk)
	testkit.Must(t, err)
	testkit.Must(t, os.WriteFile(img, b, 0o644))
	consolePath := filepath.Join(dir, "console.log")
	con, err := os.Create(consolePath)
	testkit.Must(t, err)
	cmd := exec.CommandContext(ctx, qemu, "-accel", "tcg", "-m", "2048", "-smp", "1", "-nographic", "-no-reboot", "-uuid", uuid,
		"-drive", "file="+img+",format=raw,if=virtio", "-drive", "file="+iso+",format=raw,if=virtio,readonly=on",
		"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0", "-device", "virtio-rng-pci")
	cmd.Stdout, cmd.Stderr = con, con
	testkit.Must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(consolePath)
			t.Logf("console:\n%s", b)
		}
	})
	return consolePath
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// marks are the moments lines first appeared on a console, and others.
type marks struct {
	path  string
	start time.Time
	want  []string
	seen  map[string]time.Duration
	order []string
}

func newMarks(path string, start time.Time, want ...string) *marks {
	return &marks{path: path, start: start, want: want, seen: map[string]time.Duration{}}
}

func (m *marks) at(what string, d time.Duration) {
	if _, ok := m.seen[what]; !ok {
		m.seen[what] = d
		m.order = append(m.order, what)
	}
}

func (m *marks) scan() {
	b, _ := os.ReadFile(m.path)
	for _, w := range m.want {
		if strings.Contains(string(b), w) {
			m.at(w, time.Since(m.start))
		}
	}
}

func (m *marks) String() string {
	var b strings.Builder
	for _, w := range m.order {
		fmt.Fprintf(&b, "  %6.1fs  %s\n", m.seen[w].Seconds(), w)
	}
	return b.String()
}
