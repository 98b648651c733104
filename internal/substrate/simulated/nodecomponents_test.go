package simulated_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

const versionsEnv = `KUBEVIRT_MODULE=kubevirt.io/kubevirt
KUBEVIRT_VERSION=v1.8.4
KUBEVIRT_SUM=h1:kv=
CDI_MODULE=kubevirt.io/containerized-data-importer
CDI_VERSION=v1.64.0
CDI_SUM=h1:cdi=
DEBIAN_SUITE=trixie
LIBVIRT=11.3.0-3+deb13u3
QEMU=1:10.0.13+ds-0+deb13u1
IMPORTER_QEMU_UTILS=1:10.0.13+ds-0+deb13u1
VIRT_LAUNCHER_IMAGE=sha256:1
VIRT_HANDLER_IMAGE=sha256:2
VIRT_API_IMAGE=sha256:3
CDI_IMPORTER_IMAGE=sha256:4
WORKER_KERNEL=linux-image-6.12.118+deb13-amd64=6.12.118-1
WORKER_DISK_IMAGE=sha256:5
`

// fakeNodeHost has a kubelet (this test binary, whose build information stands for it), the
// two Debian packages, and an images folder whose versions.env is env.
func fakeNodeHost(t *testing.T, env string) simulated.NodeComponentHost {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(tools, "kubelet")); err != nil {
		t.Fatal(err)
	}
	imgs := t.TempDir()
	if err := os.WriteFile(filepath.Join(imgs, "versions.env"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	return simulated.NodeComponentHost{
		Tools:  func() (node.Tools, error) { return node.Tools{Dir: tools}, nil },
		Images: func() (node.Images, error) { return node.Images{Dir: imgs}, nil },
		Installed: func(pkg string) (string, error) {
			return map[string]string{"containerd": "1.6.20~ds1-1+deb12u3", "runc": "1.1.5+ds1-1+deb12u1"}[pkg], nil
		},
	}
}

// run.json lists each piece of the real Node: modules with their sums, Debian packages with
// their versions (and the suite of the images' packages), each image with its digest.
func TestNodeComponentsListEveryPieceWithItsVersion(t *testing.T) {
	comps, err := simulated.NodeComponents(fakeNodeHost(t, versionsEnv))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range comps {
		got[c.Name] = c.Module + "@" + c.Version + " " + c.Sum + " | " + c.Use
	}
	want := map[string][]string{
		"kubelet":       {"github.com/cozystack/cozy-e2e"},
		"containerd":    {"debian containerd@1.6.20~ds1-1+deb12u3", "process on this host"},
		"runc":          {"debian runc@1.1.5+ds1-1+deb12u1"},
		"virt-handler":  {"kubevirt.io/kubevirt@v1.8.4 h1:kv=", "quay.io/kubevirt/virt-handler:v1.8.4 built here (sha256:2)"},
		"virt-launcher": {"kubevirt.io/kubevirt@v1.8.4 h1:kv=", "(sha256:1)"},
		"virt-api":      {"kubevirt.io/kubevirt@v1.8.4 h1:kv=", "(sha256:3)"},
		"cdi-importer":  {"kubevirt.io/containerized-data-importer@v1.64.0 h1:cdi=", "(sha256:4)"},
		"qemu":          {"debian trixie qemu-system-x86@1:10.0.13+ds-0+deb13u1"},
		"libvirt":       {"debian trixie libvirt-daemon-driver-qemu@11.3.0-3+deb13u3"},
		"qemu-utils":    {"debian trixie qemu-utils@1:10.0.13+ds-0+deb13u1", "cdi-importer image"},
		"worker-kernel": {"debian trixie linux-image-6.12.118+deb13-amd64@6.12.118-1", "(sha256:5)"},
	}
	for name, parts := range want {
		for _, p := range parts {
			if !strings.Contains(got[name], p) {
				t.Errorf("%s: %q lacks %q", name, got[name], p)
			}
		}
	}
	if len(comps) != len(want) {
		t.Errorf("%d components, want %d: %v", len(comps), len(want), got)
	}

	// An images folder from before a key was recorded names the key and the command.
	_, err = simulated.NodeComponents(fakeNodeHost(t, strings.Replace(versionsEnv, "WORKER_KERNEL=", "OLD_KERNEL=", 1)))
	if err == nil || !strings.Contains(err.Error(), "has no WORKER_KERNEL: run `make node-images` again") {
		t.Errorf("a versions.env without WORKER_KERNEL: %v", err)
	}
	h := fakeNodeHost(t, versionsEnv)
	h.Installed = func(pkg string) (string, error) { return "", errors.New("dpkg-query -W runc: exit status 1") }
	if _, err := simulated.NodeComponents(h); err == nil || !strings.Contains(err.Error(), "the real Node's containerd") {
		t.Errorf("no containerd package: %v", err)
	}
}

// On this machine, with the node's tools and images built (make test builds them), the real
// Node's components read from them.
func TestNodeComponentsOfThisMachine(t *testing.T) {
	if _, err := node.FindImages(); err != nil {
		testkit.Unavailable(t, err)
	}
	comps, err := simulated.NodeComponents(simulated.ThisNodeHost())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range comps {
		t.Logf("%-13s %s@%s %s", c.Name, c.Module, c.Version, c.Sum)
		if c.Name == "kubelet" && c.Module+"@"+c.Version != "k8s.io/kubernetes@v1.35.4" {
			t.Errorf("kubelet: %s@%s, want k8s.io/kubernetes@v1.35.4", c.Module, c.Version)
		}
		if c.Version == "" {
			t.Errorf("%s: no version", c.Name)
		}
	}
}
