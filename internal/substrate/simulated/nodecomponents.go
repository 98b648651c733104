package simulated

import (
	"debug/buildinfo"
	"fmt"
	"os/exec"
	"strings"

	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// debianPackage is the Module of a component that is a Debian package: its version is the
// package's, and it has no module sum.
const debianPackage = "debian"

// NodeComponentHost is where the real Node's components are read from; tests replace it.
type NodeComponentHost struct {
	Tools  func() (node.Tools, error)
	Images func() (node.Images, error)
	// Installed is the version of a Debian package installed on this host.
	Installed func(pkg string) (string, error)
}

// ThisNodeHost reads this machine: the node's tools and images folders and dpkg's database.
func ThisNodeHost() NodeComponentHost {
	return NodeComponentHost{Tools: node.FindTools, Images: node.FindImages, Installed: dpkgVersion}
}

func dpkgVersion(pkg string) (string, error) {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", pkg).Output()
	if err != nil {
		return "", fmt.Errorf("dpkg-query -W %s: %w", pkg, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// NodeComponents are the real Node's components, as run.json lists them: the kubelet (its module
// and sum, from the binary's build information), containerd and runc (Debian packages of this
// host), and what the node images carry as hack/tools/build-images.sh recorded it in their
// versions.env: KubeVirt's node binaries and CDI's importer (their modules and sums), the Debian
// packages QEMU, libvirt and qemu-utils come from (the suite named), and the worker disk's kernel.
func NodeComponents(h NodeComponentHost) ([]substrate.Component, error) {
	tools, err := h.Tools()
	if err != nil {
		return nil, err
	}
	info, err := buildinfo.ReadFile(tools.Path("kubelet"))
	if err != nil {
		return nil, fmt.Errorf("sim: the real Node's kubelet: %w", err)
	}
	out := []substrate.Component{{Name: "kubelet", Module: info.Main.Path, Version: info.Main.Version, Sum: info.Main.Sum,
		Use: "process, the real Node's (kubelet, built by make node-tools)"}}
	for _, pkg := range []string{"containerd", "runc"} {
		v, err := h.Installed(pkg)
		if err != nil {
			return nil, fmt.Errorf("sim: the real Node's %s: %w", pkg, err)
		}
		out = append(out, substrate.Component{Name: pkg, Module: debianPackage + " " + pkg, Version: v, Use: "process on this host, the real Node's (Debian package)"})
	}
	imgs, err := h.Images()
	if err != nil {
		return nil, err
	}
	env, err := realupstream.ReadEnv(imgs.Versions())
	if err != nil {
		return nil, fmt.Errorf("sim: the node images' versions: %w", err)
	}
	get := func(keys ...string) ([]string, error) {
		var vs []string
		for _, k := range keys {
			v, ok := env[k]
			if !ok || v == "" {
				return nil, fmt.Errorf("sim: %s has no %s: run `make node-images` again", imgs.Versions(), k)
			}
			vs = append(vs, v)
		}
		return vs, nil
	}
	suite, err := get("DEBIAN_SUITE")
	if err != nil {
		return nil, err
	}
	for _, c := range []struct{ name, module, image, use string }{
		{"virt-handler", "KUBEVIRT", "VIRT_HANDLER_IMAGE", "Pod on the real Node, image " + node.UpstreamRefs[node.VirtHandler] + " built here"},
		{"virt-launcher", "KUBEVIRT", "VIRT_LAUNCHER_IMAGE", "Pod on the real Node per VMI, image " + node.UpstreamRefs[node.VirtLauncher] + " built here"},
		{"virt-api", "KUBEVIRT", "VIRT_API_IMAGE", "Pod on the real Node, image " + node.UpstreamRefs[node.VirtAPI] + " built here"},
		{"cdi-importer", "CDI", "CDI_IMPORTER_IMAGE", "Pod on the real Node per import, image " + node.UpstreamRefs[node.CDIImporter] + " built here"},
	} {
		vs, err := get(c.module+"_MODULE", c.module+"_VERSION", c.module+"_SUM", c.image)
		if err != nil {
			return nil, err
		}
		out = append(out, substrate.Component{Name: c.name, Module: vs[0], Version: vs[1], Sum: vs[2], Use: c.use + " (" + vs[3] + ")"})
	}
	for _, c := range []struct{ name, pkg, key, use string }{
		{"qemu", "qemu-system-x86", "QEMU", "in the virt-launcher image, under TCG"},
		{"libvirt", "libvirt-daemon-driver-qemu", "LIBVIRT", "in the virt-launcher image"},
		{"qemu-utils", "qemu-utils", "IMPORTER_QEMU_UTILS", "in the cdi-importer image (qemu-img)"},
	} {
		vs, err := get(c.key)
		if err != nil {
			return nil, err
		}
		out = append(out, substrate.Component{Name: c.name, Module: debianPackage + " " + suite[0] + " " + c.pkg, Version: vs[0], Use: c.use + " (Debian package)"})
	}
	vs, err := get("WORKER_KERNEL", "WORKER_DISK_IMAGE")
	if err != nil {
		return nil, err
	}
	pkg, version, _ := strings.Cut(vs[0], "=")
	out = append(out, substrate.Component{Name: "worker-kernel", Module: debianPackage + " " + suite[0] + " " + pkg, Version: version,
		Use: "the worker disk's kernel, image " + node.UpstreamRefs[node.WorkerDisk] + " built here (" + vs[1] + ")"})
	return out, nil
}
