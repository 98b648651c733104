package node_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// builtImages fails the test under CI when the images are not built or this machine cannot run
// them in their roots (root, unshare, overlayfs); elsewhere it skips, saying what to do.
func builtImages(t *testing.T) node.Images {
	t.Helper()
	miss := func(err error) {
		t.Helper()
		testkit.Unavailable(t, err)
	}
	if os.Geteuid() != 0 {
		miss(fmt.Errorf("the images run in their roots through chroot and mounts, which need root"))
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		miss(fmt.Errorf("unshare: %w; apt-get install -y util-linux", err))
	}
	imgs, err := node.FindImages()
	if err != nil {
		miss(err)
	}
	return imgs
}

// inImage runs script with /bin/sh in the root filesystem of the image, as a container would see
// it: an overlay of a scratch folder over the built root (which stays as built), its own /proc,
// a /dev of a few nodes, the host's /sys, empty /run and /tmp, in mount and PID namespaces of
// its own, so every process the script starts (a daemon too) ends with it. It returns the
// combined output.
func inImage(t *testing.T, imgs node.Images, image string, env []string, script string) (string, error) {
	t.Helper()
	work := t.TempDir()
	setup := `set -e
root=$1 w=$2; shift 2
mount --make-rprivate /
mkdir -p "$w/upper" "$w/work" "$w/m"
mount -t overlay overlay -o "lowerdir=$root,upperdir=$w/upper,workdir=$w/work" "$w/m"
m=$w/m
mount -t proc proc "$m/proc"
mount --rbind /sys "$m/sys"
mount -t tmpfs tmpfs "$m/dev"
for n in null zero full random urandom tty; do touch "$m/dev/$n"; mount --bind "/dev/$n" "$m/dev/$n"; done
ln -s /proc/self/fd "$m/dev/fd"; ln -s /proc/self/fd/0 "$m/dev/stdin"; ln -s /proc/self/fd/1 "$m/dev/stdout"; ln -s /proc/self/fd/2 "$m/dev/stderr"
mkdir -p "$m/dev/pts" "$m/dev/shm"
mount -t tmpfs tmpfs "$m/run"
mount -t tmpfs tmpfs "$m/tmp"
exec chroot "$m" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"
`
	args := []string{"--mount", "--pid", "--fork", "--kill-child", "/bin/sh", "-c", setup, "_", imgs.Rootfs(image), work}
	args = append(args, env...)
	args = append(args, "/bin/sh", "-c", script)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// mustRun is inImage that fails the test when the script fails or its output lacks a wanted text.
func mustRun(t *testing.T, imgs node.Images, image string, env []string, script string, want ...string) string {
	t.Helper()
	start := time.Now()
	out, err := inImage(t, imgs, image, env, script)
	if err != nil {
		t.Fatalf("%s image: %q failed: %v\n%s", image, script, err, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s image: %q printed no %q:\n%s", image, script, w, out)
		}
	}
	t.Logf("%s image: %q ran in %s", image, script, time.Since(start).Round(100*time.Millisecond))
	return out
}

// The images' binaries run in their own roots, linked against the Debian libraries there: each
// answers --help, and ldd finds every library, libvirt and libnbd among them. virt-launcher
// lists its flags `allow-emulation` and `ovmf-path` (kubevirt.io/kubevirt v1.8.4
// cmd/virt-launcher/virt-launcher.go:352,361); cdi-importer lists klog's.
func TestImageBinariesRunInTheirRoots(t *testing.T) {
	imgs := builtImages(t)
	for _, c := range []struct {
		image, script string
		want          []string
	}{
		{node.VirtLauncher, "virt-launcher --help", []string{"--allow-emulation", "--ovmf-path"}},
		{node.VirtLauncher, "ldd /usr/bin/virt-launcher && ! ldd /usr/bin/virt-launcher | grep 'not found'", []string{"libvirt.so.0 => /", "libnbd.so.0 => /"}},
		{node.VirtHandler, "virt-handler --help", []string{"--hostname-override"}},
		{node.VirtHandler, "ldd /usr/bin/virt-handler && ! ldd /usr/bin/virt-handler | grep 'not found'", []string{"libc.so.6 => /"}},
		{node.CDIImporter, "cdi-importer --help 2>&1; true", []string{"-alsologtostderr"}},
		{node.CDIImporter, "ldd /usr/bin/cdi-importer && ! ldd /usr/bin/cdi-importer | grep 'not found'", []string{"libnbd.so.0 => /"}},
		{node.CDIImporter, "qemu-img --version && nbdkit --dump-plugin curl", []string{"qemu-img version 10.0", "curl_version="}},
	} {
		mustRun(t, imgs, c.image, nil, c.script, c.want...)
	}
	// What containerd unpacks: the launcher's layer carries /var/run as ../run and
	// virt-launcher-monitor's cap_net_bind_service (cmd/virt-launcher/BUILD.bazel:70-78,166-178).
	img, err := node.LayoutImage(imgs.Layout(node.VirtLauncher))
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("launcher image: %d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	found := map[string]bool{}
	for tr := tar.NewReader(rc); ; {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Name {
		case "var/run":
			found[h.Name] = h.Typeflag == tar.TypeSymlink && h.Linkname == "../run"
		case "usr/bin/virt-launcher-monitor":
			// VFS_CAP_REVISION_2, CAP_NET_BIND_SERVICE (bit 10) permitted, effective flag set.
			c := h.PAXRecords["SCHILY.xattr.security.capability"]
			found[h.Name] = len(c) == 20 && c[0] == 1 && c[3] == 2 && c[5] == 4
		}
	}
	for _, n := range []string{"var/run", "usr/bin/virt-launcher-monitor"} {
		if !found[n] {
			t.Errorf("launcher image layer: %s is missing or not as built (a ../run link; cap_net_bind_service)", n)
		}
	}

	// virt-api's image has no shell (upstream's is distroless): its static binary, run directly.
	out, err := exec.Command("chroot", imgs.Rootfs(node.VirtAPI), "/usr/bin/virt-api", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--subresources-only") {
		t.Errorf("virt-api image: /usr/bin/virt-api --help: %v\n%s", err, out)
	}
}

// virt-handler's init container, with the virt type qemu, succeeds in the launcher's root.
// virt-operator renders it from the launcher image, running `node-labeller.sh` with
// `PREFERRED_VIRTTYPE` and `HYPERVISOR_DEVICE` set (kubevirt.io/kubevirt v1.8.4
// pkg/virt-operator/resource/generate/components/daemonsets.go:144-167). The script starts
// virtqemud (libvirtd under that name, with a virtqemud-sock), and virsh writes the domain
// capabilities with a host-model CPU under TCG, the CPU baseline and the host capabilities. Run
// as the non-root launcher runs it, uid 107 with `XDG_RUNTIME_DIR` at /var/run
// (pkg/virt-controller/services/rendercontainer.go:18-20,187-203), virtqemud answers on the
// `virtqemud-sock` URI virt-launcher dials (cmd/virt-launcher/virt-launcher.go:125).
func TestLauncherImageRunsTheNodeLabeller(t *testing.T) {
	imgs := builtImages(t)
	out := mustRun(t, imgs, node.VirtLauncher, []string{"PREFERRED_VIRTTYPE=qemu", "HYPERVISOR_DEVICE=kvm"},
		`mkdir -p /var/lib/kubevirt-node-labeller && node-labeller.sh >/tmp/labeller.log 2>&1 || { cat /tmp/labeller.log; exit 1; }
echo "comm: $(cat /proc/$(cat /run/libvirtd.pid)/comm)"
ls -l /run/libvirt/ | grep virtqemud-sock
virsh -c 'qemu+unix:///system?socket=/var/run/libvirt/virtqemud-sock' uri
cd /var/lib/kubevirt-node-labeller && grep -c . virsh_domcapabilities.xml supported_features.xml capabilities.xml
cat virsh_domcapabilities.xml capabilities.xml`,
		"comm: virtqemud", "virtqemud-sock -> libvirt-sock", "<domain>qemu</domain>", "<mode name='host-model' supported='yes'>", "<arch>x86_64</arch>")
	if !strings.Contains(out, "<path>/usr/bin/qemu-system-x86_64</path>") {
		t.Errorf("the domain capabilities name no /usr/bin/qemu-system-x86_64 emulator:\n%s", out)
	}
	mustRun(t, imgs, node.VirtLauncher, nil,
		`mkdir -p /run/libvirt /run/kubevirt-private && chmod 0777 /run/libvirt /run/kubevirt-private
cp /etc/libvirt/virtqemud.conf /run/libvirt/
q() { setpriv --reuid=107 --regid=107 --clear-groups env XDG_RUNTIME_DIR=/var/run XDG_CONFIG_HOME=/var/run/kubevirt-private XDG_CACHE_HOME=/var/run/kubevirt-private HOME=/home/qemu "$@"; }
q virtqemud -f /var/run/libvirt/virtqemud.conf >/tmp/virtqemud.log 2>&1 &
i=0; until [ -S /run/libvirt/libvirt-sock ]; do i=$((i+1)); [ $i -lt 120 ] || { cat /tmp/virtqemud.log; exit 1; }; sleep 0.5; done
p=$(cat /run/libvirt/libvirtd.pid); echo "daemon: $(stat -c %U /proc/$p) $(cat /proc/$p/comm)"
q virsh -c 'qemu+unix:///session?socket=/var/run/libvirt/virtqemud-sock' domcapabilities --virttype qemu --machine q35 --arch x86_64`,
		"daemon: qemu virtqemud", "<domain>qemu</domain>")
}

// standaloneVMI is the smallest VMI virt-launcher starts by itself, from `STANDALONE_VMI`
// (kubevirt.io/kubevirt v1.8.4 pkg/virt-launcher/standalone/standalone.go:34-50): what
// virt-api's defaults would add written out (a firmware UUID, ACPI, which UEFI needs), EFI
// without secure boot, no disk.
const standaloneVMI = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance",
"metadata":{"name":"probe","namespace":"default","uid":"6a1f3e52-7c1b-4d8e-9f00-000000000001"},
"spec":{"domain":{"features":{"acpi":{}},"machine":{"type":"q35"},"devices":{},
"firmware":{"uuid":"5d307ca9-b3ef-428c-8861-06e72d69f223","bootloader":{"efi":{"secureBoot":false}}},
"memory":{"guest":"128Mi"},"resources":{"requests":{"memory":"128Mi"}}}}}`

// virt-launcher runs a VM in its root. With --allow-emulation and no /dev/kvm it starts
// virtqemud and virtlogd and turns the VMI into a domain under software emulation, logging
// `kvm not present` (kubevirt.io/kubevirt v1.8.4
// pkg/hypervisor/kvm/kvm-domain-configurator.go:49). libvirt runs QEMU under TCG with OVMF from
// the names KubeVirt looks for, `OVMF_CODE.fd` and `OVMF_VARS.fd`
// (pkg/virt-launcher/virtwrap/efi/efi.go:28-33), and the firmware's boot manager lines reach the
// serial log KubeVirt keeps, virt-serial0-log under /var/run/kubevirt-private/<uid>. Without
// virt-handler its notify socket is absent, which it only logs.
func TestLauncherImageBootsAVMUnderTCG(t *testing.T) {
	imgs := builtImages(t)
	mustRun(t, imgs, node.VirtLauncher, []string{"STANDALONE_VMI=" + standaloneVMI},
		`mkdir -p /var/run/kubevirt /var/run/kubevirt-private /var/run/kubevirt-ephemeral-disks /var/run/libvirt /var/log/libvirt/qemu
uid=6a1f3e52-7c1b-4d8e-9f00-000000000001
virt-launcher --qemu-timeout 120s --name probe --uid $uid --namespace default --allow-emulation --grace-period-seconds 5 >/tmp/launcher.log 2>&1 &
log=/var/run/kubevirt-private/$uid/virt-serial0-log
i=0; until grep -aq BdsDxe $log 2>/dev/null; do i=$((i+1)); [ $i -lt 240 ] || { echo no boot line after 120 s; grep -v 'Domain XML' /tmp/launcher.log | tail -20; exit 1; }; sleep 0.5; done
echo "firmware on the serial log after $((i/2)) s:"; grep -ao 'BdsDxe: [^(]*' $log | head -1
virsh list; pgrep -a qemu-system | grep -o -- '-accel tcg'; grep -o 'kvm not present[^"]*' /tmp/launcher.log`,
		"BdsDxe: loading", "default_probe   running", "-accel tcg", "kvm not present. Using software emulation.")
}

// On the real Node the launcher image is what virt-handler's init container runs: served by
// the local registry under upstream's name, pulled by containerd through its mirror entry, and
// run by the kubelet as virt-operator renders the container: `node-labeller.sh` under /bin/sh,
// `Privileged`, the `node-labeller` volume mounted (kubevirt.io/kubevirt v1.8.4
// pkg/virt-operator/resource/generate/components/daemonsets.go:144-172), here at
// /var/lib/kubevirt-node-labeller, with the virt type qemu. The Pod succeeds and the files it
// wrote are on the host.
func TestRealNodeRunsTheNodeLabellerFromTheLauncherImage(t *testing.T) {
	tools := nodeHost(t)
	imgs := builtImages(t)
	api := cptest.APIServer(t, controlplane.APIServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), simtest.HostSlotWait+8*time.Minute)
	defer cancel()
	c := kubernetes.NewForConfigOrDie(api.Admin())

	reg := registry(ctx, t, tools, io.Discard)
	digests, err := imgs.Push(ctx, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(ctx, t, tools, api, reg)

	labels := t.TempDir()
	ref := node.UpstreamRefs[node.VirtLauncher]
	yes, no := true, false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "node-labeller", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: n.Name, RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: &no,
			TerminationGracePeriodSeconds: new(int64),
			Tolerations:                   []corev1.Toleration{{Key: node.Taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name: "virt-launcher", Image: ref, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/sh", "-c"}, Args: []string{"node-labeller.sh"},
				Env:             []corev1.EnvVar{{Name: "PREFERRED_VIRTTYPE", Value: "qemu"}, {Name: "HYPERVISOR_DEVICE", Value: "kvm"}},
				SecurityContext: &corev1.SecurityContext{Privileged: &yes},
				VolumeMounts:    []corev1.VolumeMount{{Name: "node-labeller", MountPath: "/var/lib/kubevirt-node-labeller"}},
			}},
			Volumes: []corev1.Volume{{Name: "node-labeller", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: labels}}}},
		},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	testkit.Eventually(ctx, t, "the node-labeller Pod Succeeded", testkit.Left(ctx), testkit.Err(func() error {
		p, err := c.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got = p
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("the node-labeller Pod failed: %+v; its log is under %s", p.Status.ContainerStatuses, filepath.Join(n.Dir(), "kubelet", "pod-logs"))
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s, containers %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	}))
	t.Logf("the node-labeller Pod from create to Succeeded (pulling %s): %s", ref, time.Since(start).Round(100*time.Millisecond))
	cs := got.Status.ContainerStatuses[0]
	if want := digests[ref].String(); !strings.HasSuffix(cs.ImageID, "@"+want) {
		t.Errorf("container image id %q, want the digest the registry served, %s", cs.ImageID, want)
	}
	dom, err := os.ReadFile(filepath.Join(labels, "virsh_domcapabilities.xml"))
	if err != nil || !bytes.Contains(dom, []byte("<domain>qemu</domain>")) {
		t.Errorf("the labeller's domain capabilities on the host: %v\n%s", err, dom)
	}
	if _, err := os.Stat(filepath.Join(labels, "capabilities.xml")); err != nil {
		t.Error(err)
	}
}
