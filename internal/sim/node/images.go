package node

import (
	"context"
	"fmt"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// The images hack/tools/build-images.sh builds for KubeVirt v1.8.4 and CDI v1.64.0 (their
// layouts are oci/<name> in the images folder, their root filesystems rootfs/<name>).
const (
	VirtLauncher = "virt-launcher"
	VirtHandler  = "virt-handler"
	VirtAPI      = "virt-api"
	CDIImporter  = "cdi-importer"
	// WorkerDisk is the worker's bootable disk (Debian's kernel, a busybox initramfs, SYSLINUX)
	// as an image in the layout KubeVirt's container disks and CDI's registry imports read: the
	// disk alone under /disk.
	WorkerDisk = "worker-disk"
	// WorkerDiskJoin is the same disk booting with cozy.join=guest: its init hands the join to
	// the OS stand-in inside the guest (internal/sim/guestos) instead of leaving it to the host.
	WorkerDiskJoin = "worker-disk-join"
)

// GuestInit begins the first line the worker disk's init says on the serial console
// (hack/tools/images/guest-init).
const GuestInit = "cozy-e2e guest: init started"

// WorkerDiskURL is the worker disk as a CDI registry source names it on the registry at host
// (host:port), as Images.Push serves it there: the one whose guest joins by itself when
// guestJoin is set (the real-Node lanes' workers), or the one that boots and waits (the tests
// that boot a VM with no tenant to join).
func WorkerDiskURL(host string, guestJoin bool) string {
	repo := WorkerDiskRepo
	if guestJoin {
		repo = WorkerDiskJoin
	}
	return "docker://" + host + "/" + repo + ":latest"
}

// WorkerDiskRepo is the worker disk's repository on the local registry.
const WorkerDiskRepo = "worker-disk"

// ImageNames are the images build-images.sh builds.
var ImageNames = []string{VirtLauncher, VirtHandler, VirtAPI, CDIImporter, WorkerDisk, WorkerDiskJoin}

// UpstreamRefs are the names upstream publishes the images under, by tag: KubeVirt's at
// quay.io/kubevirt/<name> (kubevirt.io/kubevirt v1.8.4 BUILD.bazel:231,243,249, the oci_push
// repositories), CDI's importer as cdi-operator names it (internal/sim/realupstream CDIImages). A lane
// pushes them under the names its controllers are configured with instead, when those differ.
var UpstreamRefs = map[string]string{
	VirtLauncher: "quay.io/kubevirt/virt-launcher:v1.8.4",
	VirtHandler:  "quay.io/kubevirt/virt-handler:v1.8.4",
	VirtAPI:      "quay.io/kubevirt/virt-api:v1.8.4",
	CDIImporter:  "quay.io/kubevirt/cdi-importer:v1.64.0",
	// the worker disk is the harness's own, published nowhere: its name says so
	WorkerDisk:     "cozy-e2e.local/" + WorkerDiskRepo + ":latest",
	WorkerDiskJoin: "cozy-e2e.local/" + WorkerDiskJoin + ":latest",
}

// Images is the folder hack/tools/build-images.sh builds the node's KubeVirt and CDI images
// into, keyed by their pins apart from the node's binaries (Tools) and the control plane's.
type Images struct{ Dir string }

// FindImages locates the images: $E2E_NODE_IMAGES_DIR, or the folder hack/tools/build-images.sh
// prints for this checkout. It names every missing image and how to build it.
func FindImages() (Images, error) {
	var want []string
	for _, n := range ImageNames {
		want = append(want, filepath.Join("oci", n, "index.json"))
	}
	t, err := controlplane.LocateTools("E2E_NODE_IMAGES_DIR", "build-images.sh", want,
		"the real node's images are", "run `make node-images` (hack/tools/build-images.sh; needs root and mmdebstrap)")
	return Images{Dir: t.Dir}, err
}

// Layout is the OCI image layout of the image.
func (i Images) Layout(name string) string { return filepath.Join(i.Dir, "oci", name) }

// Rootfs is the root filesystem the image was packed from.
func (i Images) Rootfs(name string) string { return filepath.Join(i.Dir, "rootfs", name) }

// WorkerDiskJoinFile is the disk the worker-disk-join image carries as /disk/disk.img: the
// worker-disk image's disk, its kernel told cozy.join=guest.
func (i Images) WorkerDiskJoinFile() string { return filepath.Join(i.Dir, "disk", "disk-join.img") }

// Versions is the file that lists the modules, Debian packages and image digests of the build.
func (i Images) Versions() string { return filepath.Join(i.Dir, "versions.env") }

// Push serves every image from r under the names refs gives (UpstreamRefs for a name refs
// lacks) and returns the digests they got.
func (i Images) Push(ctx context.Context, r *Registry, refs map[string]string) (map[string]v1.Hash, error) {
	out := map[string]v1.Hash{}
	for _, n := range ImageNames {
		ref := refs[n]
		if ref == "" {
			ref = UpstreamRefs[n]
		}
		d, err := r.PushLayout(ctx, ref, i.Layout(n))
		if err != nil {
			return nil, fmt.Errorf("serving the %s image as %s: %w", n, ref, err)
		}
		out[ref] = d
	}
	return out, nil
}
