#!/usr/bin/env bash
# Builds the images the sim's real Node runs for KubeVirt and CDI, from the pinned modules and
# Debian packages: virt-launcher, virt-handler, virt-api (kubevirt.io/kubevirt v1.8.4, tools
# module hack/tools/kubevirt-node) and cdi-importer (kubevirt.io/containerized-data-importer
# v1.64.0, hack/tools/cdi-importer), each a Debian trixie root filesystem from deb.debian.org
# (mmdebstrap) with the binaries added, packed as a one-layer OCI image layout
# (hack/packimage) that the node's local registry serves in place (internal/sim/node).
#
# The cgo binaries (virt-launcher: libvirt and libnbd; virt-handler: <linux/kvm.h>; cdi-importer:
# libnbd) are compiled inside a trixie build root with this machine's Go bound in, against the
# libvirt-dev and libnbd-dev whose runtime libraries go into the images. libnbd's Go bindings are
# not on the module proxy (403 for libguestfs.org/libnbd): they come from libnbd's Debian source
# package (apt-get source), the version of that build root's libnbd-dev, and both tools modules
# replace the module with them.
#
#   hack/tools/build-images.sh            build what is missing, print the folder
#   hack/tools/build-images.sh --print    print the folder only
#
# E2E_NODE_IMAGES_DIR overrides the folder. A warm run only checks stamps and versions.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
KUBEVIRT_MODULE=kubevirt.io/kubevirt
KUBEVIRT_VERSION=1.8.4
# The tag's commit (github.com/kubevirt/kubevirt v1.8.4), stamped into the binaries as upstream's
# version_x_defs does (staging/src/kubevirt.io/client-go/version/def.bzl).
KUBEVIRT_COMMIT=dfaa398f086692d19e01be21d83a01036e07815f
CDI_MODULE=kubevirt.io/containerized-data-importer
CDI_VERSION=1.64.0
DEBIAN_SUITE=trixie
DEBIAN_SOURCES=(
	"deb http://deb.debian.org/debian $DEBIAN_SUITE main"
	"deb-src http://deb.debian.org/debian $DEBIAN_SUITE main"
	"deb http://deb.debian.org/debian $DEBIAN_SUITE-updates main"
	"deb http://deb.debian.org/debian-security $DEBIAN_SUITE-security main"
)
# The build root: the C toolchain and the headers and pkg-config files the cgo packages name
# (libvirt.org/go/libvirt connect.go `#cgo pkg-config: libvirt`; libnbd bindings.go
# `#cgo pkg-config: libnbd`).
BUILD_PACKAGES="gcc libc6-dev pkg-config libvirt-dev libnbd-dev libcap2-bin ca-certificates"
# virt-launcher: libvirt's QEMU driver and client (virsh, for node-labeller.sh), virtlogd, QEMU,
# qemu-img, xorriso (cloud-init ISOs), OVMF, and the run-time libnbd (kubevirt.io/kubevirt v1.8.4
# cmd/virt-launcher/BUILD.bazel, rpm/BUILD.bazel launcherbase; docs/sim.md has the mapping).
LAUNCHER_PACKAGES="libvirt-daemon libvirt-daemon-driver-qemu libvirt-daemon-log libvirt-clients qemu-system-x86 qemu-utils xorriso ovmf libnbd0 procps ca-certificates"
# virt-handler: the tools of upstream's handlerbase it calls (iproute2, nftables, qemu-img,
# xorriso, procps, psmisc; rpm/BUILD.bazel handlerbase_x86_64_cs9).
HANDLER_PACKAGES="iproute2 nftables qemu-utils xorriso procps psmisc ca-certificates"
# cdi-importer: qemu-img, nbdkit (its curl plugin and filters), the run-time libnbd, CA anchors
# (CDI v1.64.0 rpm/BUILD.bazel cdi_importer_base).
IMPORTER_PACKAGES="qemu-utils nbdkit libnbd0 ca-certificates"
# The worker's disk (images/lib.sh build_worker_disk): Debian's kernel (linux-image-amd64's),
# busybox for its initramfs, SYSLINUX to boot it, and the tools that make it.
WORKER_DISK_PACKAGES="busybox-static syslinux syslinux-common mtools dosfstools cpio"
# What the guest's own join runs beside the stand-in OS: Debian's containerd, runc and CNI
# plugins, with the libraries they load (the worker disk unpacks them, never installs them).
GUEST_PACKAGES="containerd runc containernetworking-plugins libseccomp2 libc6"
# The kubelet in the worker disk: the version the real chart's Talos workers name for the lanes'
# Kubernetes v1.35 (cozystack/cozystack v1.6.1 packages/apps/kubernetes/files/versions.yaml,
# lanes/sim-node.yaml patch), from its own tools module (hack/tools/guest), static as
# hack/tools/build-node.sh builds the node's.
GUEST_K8S_VERSION=1.35.6
export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}$CDI_MODULE

key=$({
	cat "$here/kubevirt-node/go.sum" "$here/cdi-importer/go.sum"
	printf '%s\n' "kubevirt=$KUBEVIRT_VERSION@$KUBEVIRT_COMMIT cdi=$CDI_VERSION" "${DEBIAN_SOURCES[@]}"
	echo "$BUILD_PACKAGES|$LAUNCHER_PACKAGES|$HANDLER_PACKAGES|$IMPORTER_PACKAGES"
} | sha256sum | cut -c1-12)
dir=${E2E_NODE_IMAGES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cozy-e2e/tools/node-images-kubevirt-v$KUBEVIRT_VERSION-cdi-v$CDI_VERSION-$DEBIAN_SUITE-$key}

if [[ ${1:-} == --print ]]; then
	echo "$dir"
	exit 0
fi

# What this needs beyond Go: root (chroot, bind mounts), mmdebstrap, unshare and setcap. Outside
# CI a machine without them skips the images, as the real Node's test skips there; under CI it is
# an error.
missing=()
[[ $(id -u) == 0 ]] || missing+=("root")
for c in mmdebstrap unshare setcap; do command -v "$c" >/dev/null || missing+=("$c"); done
if ((${#missing[@]})); then
	msg="missing ${missing[*]}; as root: apt-get install -y mmdebstrap util-linux libcap2-bin"
	if [[ -n ${CI:-} ]]; then
		echo "make node-images: $msg" >&2
		exit 2
	fi
	echo "make node-images: skipped, $msg"
	exit 0
fi

mkdir -p "$dir"/{bin,stamps,rootfs,oci,src,logs}
# One build at a time per folder (make test builds it beside the other tools).
exec 9>"$dir/.lock"
flock 9
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
total_start=$(date +%s.%N)
built=0
echo "make node-images: $dir"
source "$here/images/lib.sh"

# 1. The build root, and libnbd's Go bindings from the source of its libnbd-dev.
stage build-root "$BUILD_PACKAGES ${DEBIAN_SOURCES[*]}" make_build_root
nbd_version=$(chroot "$dir/build-root" dpkg-query -W -f '${source:Upstream-Version}' libnbd-dev)
nbd=$dir/src/libnbd-$nbd_version/golang
stage libnbd-source "$nbd_version $(declare -f unpack_libnbd | sha256sum)" unpack_libnbd
for m in kubevirt-node cdi-importer; do
	ln -sfn "$nbd" "$here/$m/libnbd"
done

# 2. The binaries, built as upstream builds them: with cgo (KubeVirt's and CDI's .bazelrc build for
# linux_amd64_cgo), virt-api linked static (cmd/virt-api/BUILD.bazel `static = "on"`),
# cdi-containerimage-server pure Go (tools/cdi-containerimage-server/BUILD.bazel `pure = "on"`).
# The cgo ones compile in the build root, each module's binaries in one `go build`, so every
# package compiles once and the links run in parallel; virt-api links from the same packages.
kv_sum=$(awk -v m="$KUBEVIRT_MODULE" -v v="v$KUBEVIRT_VERSION" '$1 == m && $2 == v { print $3 }' "$here/kubevirt-node/go.sum")
cdi_sum=$(awk -v m="$CDI_MODULE" -v v="v$CDI_VERSION" '$1 == m && $2 == v { print $3 }' "$here/cdi-importer/go.sum")
kv_flags="-s -w -X kubevirt.io/client-go/version.gitVersion=v$KUBEVIRT_VERSION -X kubevirt.io/client-go/version.gitCommit=$KUBEVIRT_COMMIT -X kubevirt.io/client-go/version.gitTreeState=clean"
kv=$KUBEVIRT_MODULE/cmd
gobins kubevirt kubevirt-node cgo "$kv_flags" "$KUBEVIRT_MODULE" "v$KUBEVIRT_VERSION" "$kv_sum" \
	"$kv/virt-launcher" "$kv/virt-handler" "$kv/virt-chroot" "$kv/virt-freezer" "$kv/virt-launcher-monitor" \
	"$kv/virt-probe" "$kv/virt-tail" "$kv/virt-launcher/libvirt-hook-client"
gobins virt-api kubevirt-node cgo "$kv_flags -linkmode=external -extldflags=-static" "$KUBEVIRT_MODULE" "v$KUBEVIRT_VERSION" "$kv_sum" "$kv/virt-api"
# cdi-source-update-poller imports the importer's packages, libnbd with them.
gobins cdi cdi-importer cgo "-s -w" "$CDI_MODULE" "v$CDI_VERSION" "$cdi_sum" \
	"$CDI_MODULE/cmd/cdi-importer" "$CDI_MODULE/tools/cdi-source-update-poller" "$CDI_MODULE/tools/cdi-image-size-detection"
gobins cdi-containerimage-server cdi-importer static "-s -w" "$CDI_MODULE" "v$CDI_VERSION" "$cdi_sum" "$CDI_MODULE/tools/cdi-containerimage-server"
kvdir=$(cd "$here/kubevirt-node" && go list -m -f '{{.Dir}}' "$KUBEVIRT_MODULE")
# container-disk is C, linked static (cmd/container-disk-v2alpha/BUILD.bazel:3-11).
stage container-disk "$(sha256sum <"$kvdir/cmd/container-disk-v2alpha/main.c")" build_container_disk

# 3. The root filesystems and their image layouts.
image virt-launcher "$LAUNCHER_PACKAGES" customize_launcher virt-launcher virt-launcher-monitor virt-freezer virt-probe virt-tail libvirt-hook-client container-disk
image virt-handler "$HANDLER_PACKAGES" customize_handler virt-handler virt-chroot
image virt-api "" customize_api virt-api
image cdi-importer "$IMPORTER_PACKAGES" customize_importer cdi-importer cdi-containerimage-server cdi-image-size-detection cdi-source-update-poller

# 4. What the guest's own join runs: the kubelet, and the OS stand-in from this checkout.
guest_sum=$(awk -v v="v$GUEST_K8S_VERSION" '$1 == "k8s.io/kubernetes" && $2 == v { print $3 }' "$here/guest/go.sum")
guest_flags="-s -w -X k8s.io/component-base/version.gitVersion=v$GUEST_K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$GUEST_K8S_VERSION") -X k8s.io/component-base/version.gitTreeState=clean"
gobins guest-kubelet guest static "$guest_flags" k8s.io/kubernetes "v$GUEST_K8S_VERSION" "$guest_sum" k8s.io/kubernetes/cmd/kubelet
guestos_src=$(cd "$repo" && cat go.sum hack/guestosd/*.go $(ls internal/sim/guestos/*.go internal/sim/bootdata/*.go | grep -v _test.go) | sha256sum)
[[ -x $dir/bin/guestos ]] || rm -f "$dir/stamps/guestos"
stage guestos "$guestos_src" build_guestos

# 5. The worker's disks and their images.
[[ -f $dir/disk/disk.img && -f $dir/disk/disk-join.img ]] || rm -f "$dir/stamps/worker-disk"
stage worker-disk "$WORKER_DISK_PACKAGES $GUEST_PACKAGES $(<"$dir/stamps/build-root") $(<"$dir/stamps/go-guest-kubelet") $guestos_src $(cat "$here/images/guest-init" "$here/images/guest-dhcp" | sha256sum) $(declare -f build_worker_disk | sha256sum)" build_worker_disk
IMAGE_FILES="$dir/disk/disk.img" image worker-disk "" customize_worker_disk
WORKER_DISK_FILE=disk-join.img IMAGE_FILES="$dir/disk/disk-join.img" image worker-disk-join "" customize_worker_disk

write_versions
printf 'make node-images: %d built, done in %ss\n' "$built" "$(since "$total_start")"
