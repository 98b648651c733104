# Functions of hack/tools/build-images.sh (sourced; it sets dir, here, repo and the pins).

# stage <name> <recipe> <fn> [args...]: runs fn unless stamps/<name> holds recipe, then writes it.
# A recipe is what the stage is made from (package lists, pins, content hashes): the same recipe
# is not built again.
stage() {
	local name=$1 recipe=$2 fn=$3 start
	shift 3
	if [[ -f $dir/stamps/$name && $(<"$dir/stamps/$name") == "$recipe" ]]; then
		printf '  %-30s up to date\n' "$name"
		return
	fi
	rm -f "$dir/stamps/$name"
	start=$(date +%s.%N)
	printf '  %-30s building ...\n' "$name"
	"$fn" "$@"
	printf '%s' "$recipe" >"$dir/stamps/$name"
	printf '  %-30s built in %ss\n' "$name" "$(since "$start")"
	built=$((built + 1))
}

# debian_root <target> <variant> <packages>: a Debian root from deb.debian.org with the packages
# (no recommends; no manuals, translations or documentation but the copyright files).
debian_root() {
	local target=$1 variant=$2 pkgs=$3 log
	rm -rf "$target"
	mkdir -p "$dir/logs"
	log=$dir/logs/mmdebstrap-${target##*/}.log
	# The system's PATH: mmdebstrap runs its helper mmtarfilter through `env python3` once per
	# package, and a python3 shim ahead in PATH (pyenv's) costs seconds each time.
	if ! PATH=/usr/sbin:/usr/bin:/sbin:/bin nice -n 15 mmdebstrap --variant="$variant" --include="${pkgs// /,}" \
		--aptopt='APT::Install-Recommends "false"' \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
		"$DEBIAN_SUITE" "$target" "${DEBIAN_SOURCES[@]}" >"$log" 2>&1; then
		echo "make node-images: mmdebstrap $DEBIAN_SUITE into $target ($pkgs) failed (log: $log):" >&2
		tail -40 "$log" | sed 's/^/    /' >&2
		exit 1
	fi
}

make_build_root() { debian_root "$dir/build-root" apt "$BUILD_PACKAGES"; }

# inroot <workdir> <command...>: runs the command in the build root, in a mount namespace of its
# own (the binds go with it), with this machine's Go, module cache, build cache, this checkout
# and the images folder bound at their own paths.
inroot() {
	local wd=$1
	shift
	cp /etc/resolv.conf "$dir/build-root/etc/resolv.conf"
	local binds
	binds=$(printf '%s\n' "$(go env GOROOT)" "$(go env GOMODCACHE)" "$(go env GOCACHE)" "$repo" "$dir" | sort -u)
	# A cold machine has neither cache yet; a bind needs its source.
	mkdir -p "$(go env GOMODCACHE)" "$(go env GOCACHE)"
	unshare -m bash -c '
		set -e
		root=$1 binds=$2 wd=$3
		shift 3
		mount --make-rprivate /
		while read -r d; do mkdir -p "$root$d"; mount --bind "$d" "$root$d"; done <<<"$binds"
		mount -t proc proc "$root/proc"
		exec chroot "$root" env -C "$wd" "$@"
	' _ "$dir/build-root" "$binds" "$wd" \
		PATH="$(go env GOROOT)/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME=/root \
		GOCACHE="$(go env GOCACHE)" GOMODCACHE="$(go env GOMODCACHE)" GOPROXY="$(go env GOPROXY)" \
		GONOSUMDB="$GONOSUMDB" GOFLAGS="$(go env GOFLAGS)" GOTOOLCHAIN=local "$@"
}

# libnbd's Go bindings: golang/ of the upstream tarball of the libnbd source package whose
# libnbd-dev the build root has (module libguestfs.org/libnbd; Debian's patches do not touch it).
unpack_libnbd() {
	local src=$dir/build-root/usr/src/libnbd ver
	ver=$(chroot "$dir/build-root" dpkg-query -W -f '${source:Version}' libnbd-dev)
	rm -rf "$src" "$dir/src/libnbd-$nbd_version"
	mkdir -p "$src"
	cp /etc/resolv.conf "$dir/build-root/etc/resolv.conf"
	chroot "$dir/build-root" sh -c "cd /usr/src/libnbd && apt-get update -qq && apt-get source --download-only -qq libnbd=$ver" >/dev/null 2>&1 || {
		echo "make node-images: apt-get source --download-only libnbd=$ver (deb-src $DEBIAN_SUITE) failed in $dir/build-root" >&2
		exit 1
	}
	mkdir -p "$dir/src/libnbd-$nbd_version"
	tar -xzf "$src/libnbd_$nbd_version.orig.tar.gz" -C "$dir/src/libnbd-$nbd_version" --strip-components=1 "libnbd-$nbd_version/golang"
	grep -q '^module libguestfs.org/libnbd$' "$nbd/go.mod" || {
		echo "make node-images: $nbd/go.mod is not module libguestfs.org/libnbd" >&2
		exit 1
	}
	# One rename, the one KubeVirt's binding carries: 1.22's bindings export the C symbol
	# freeCallbackId, as libvirt.org/go/libvirt v1.11005.0 does (its callbacks.go), so a binary with
	# both fails to link ("multiple definition of `freeCallbackId'"); the binding KubeVirt v1.8.4
	# pins exports it as nbd_internal_freeCallbackId (vendor/libguestfs.org/libnbd/callbacks.go:75,
	# wrappers.go:2801).
	sed -i 's/\bfreeCallbackId\b/nbd_internal_freeCallbackId/g' $(find "$nbd" -maxdepth 1 -name '*.go' ! -name '*_test.go')
	[[ $(grep -c '^//export nbd_internal_freeCallbackId$' "$nbd/callbacks.go") == 1 ]] || {
		echo "make node-images: renaming freeCallbackId in $nbd/callbacks.go did not take" >&2
		exit 1
	}
	cp "$src/libnbd_$ver.dsc" "$dir/src/libnbd-$nbd_version/"
}

# built_from <binary> <module> <version> <sum>: its build information says its main package came
# from the module at the version and sum go.sum pins.
built_from() {
	local out
	out=$(go version -m "$1" 2>/dev/null) || return 1
	[[ $out == *$'\tmod\t'"$2"$'\t'"$3"$'\t'"$4"* ]]
}

# gobins <stage> <tools module> cgo|static <ldflags> <module> <version> <sum> <package...>: the
# packages' binaries, named as their last path element, in one `go build` (cgo: in the build root).
gobins() {
	local name=$1 tmod=$2 kind=$3 flags=$4 mod=$5 ver=$6 sum=$7 recipe p
	shift 7
	recipe="$* $kind $flags $mod $ver $sum"
	[[ $kind == cgo ]] && recipe+=" $(<"$dir/stamps/build-root") $(<"$dir/stamps/libnbd-source")"
	for p in "$@"; do [[ -x $dir/bin/${p##*/} ]] || rm -f "$dir/stamps/go-$name"; done
	stage "go-$name" "$recipe" build_go "$tmod" "$kind" "$flags" "$mod" "$ver" "$sum" "$@"
}

build_go() {
	local tmod=$1 kind=$2 flags=$3 mod=$4 ver=$5 sum=$6 log out p b
	shift 6
	log=$(mktemp)
	out=$dir/bin/.build
	rm -rf "$out" && mkdir -p "$out"
	local cmd=(nice -n 15 go build -trimpath -ldflags="$flags" -o "$out/" "$@")
	if [[ $kind == cgo ]]; then
		# The modules come down on this machine, with its proxy, its trust and its Go settings;
		# the build root then reads them from the module cache bound in.
		(cd "$here/$tmod" && CGO_ENABLED=1 go list -deps "$@" >/dev/null) >"$log" 2>&1 || build_failed "$*" "$tmod" "$log"
		inroot "$here/$tmod" CGO_ENABLED=1 GOPROXY=off "${cmd[@]}" >"$log" 2>&1 || build_failed "$*" "$tmod" "$log"
	else
		(cd "$here/$tmod" && CGO_ENABLED=0 "${cmd[@]}") >"$log" 2>&1 || build_failed "$*" "$tmod" "$log"
	fi
	rm -f "$log"
	for p in "$@"; do
		b=${p##*/}
		built_from "$out/$b" "$mod" "$ver" "$sum" || {
			echo "make node-images: $b was built but its build information does not say $mod $ver $sum" >&2
			exit 1
		}
		mv "$out/$b" "$dir/bin/$b"
	done
	rmdir "$out"
}

build_failed() {
	echo "make node-images: building $1 (hack/tools/$2) failed:" >&2
	sed 's/^/    /' "$3" >&2
	rm -rf "$3" "$dir/bin/.build"
	exit 1
}

# build_guestos: the worker disk's OS stand-in (hack/guestosd), static, from this checkout.
build_guestos() {
	local log
	log=$(mktemp)
	(cd "$repo" && CGO_ENABLED=0 nice -n 15 go build -trimpath -ldflags="-s -w" -o "$dir/bin/guestos.tmp" ./hack/guestosd) >"$log" 2>&1 ||
		build_failed ./hack/guestosd ../.. "$log"
	rm -f "$log"
	mv "$dir/bin/guestos.tmp" "$dir/bin/guestos"
}

build_container_disk() {
	cp "$kvdir/cmd/container-disk-v2alpha/main.c" "$dir/build-root/usr/src/container-disk.c"
	chroot "$dir/build-root" nice -n 15 gcc -O2 -static -o /usr/src/container-disk /usr/src/container-disk.c
	mv "$dir/build-root/usr/src/container-disk" "$dir/bin/container-disk"
}

# image <name> <packages> <customize fn> <binaries...>: the root filesystem rootfs/<name> (a
# Debian root with the packages, or an empty one) customized by the function, packed into the
# image layout oci/<name>. Its recipe holds the packages, the binaries' and added files' hashes
# (IMAGE_FILES names the files customize adds besides) and the functions that make it, so a
# change to any of them builds it again.
image() {
	local name=$1 pkgs=$2 fn=$3 recipe
	shift 3
	recipe=$({
		echo "$pkgs"
		(cd "$dir/bin" && sha256sum "$@")
		# the files' contents, not their paths: another checkout of the same sources builds nothing
		cat "$here/images/virtqemud" "$repo/internal/sim/node/rootfs.go" "$repo/hack/packimage/main.go" | sha256sum
		[[ -z ${IMAGE_FILES:-} ]] || sha256sum $IMAGE_FILES
		declare -f debian_root "$fn" common_files pack
	} | sha256sum | cut -c1-16)
	[[ -f $dir/oci/$name/index.json ]] || rm -f "$dir/stamps/image-$name"
	stage "image-$name" "$recipe" build_image "$name" "$pkgs" "$fn" "$@"
}

build_image() {
	local name=$1 pkgs=$2 fn=$3 root=$dir/rootfs/$1 t
	shift 3
	t=$(date +%s.%N)
	if [[ -n $pkgs ]]; then
		debian_root "$root" essential "$pkgs"
		printf '  %-30s its Debian root in %ss\n' "image-$name" "$(since "$t")"
	else
		rm -rf "$root" && mkdir -p "$root"
	fi
	local b
	mkdir -p "$root/usr/bin"
	for b in "$@"; do install -m 0755 "$dir/bin/$b" "$root/usr/bin/$b"; done
	"$fn" "$root"
	if [[ -f $root/var/lib/dpkg/status ]]; then
		chroot "$root" dpkg-query -W -f '${Package}=${Version}\n' >"$dir/rootfs/$name.packages"
	else
		: >"$dir/rootfs/$name.packages"
	fi
	t=$(date +%s.%N)
	pack "$name" "$root"
	printf '  %-30s packed in %ss\n' "image-$name" "$(since "$t")"
}

# pack <name> <root>: the image layout, with the configuration customize set (entrypoint, user).
pack() {
	local args=(-root "$2" -out "$dir/oci/$1") e
	for e in "${IMG_ENTRYPOINT[@]}"; do args+=(-entrypoint "$e"); done
	[[ -n ${IMG_USER:-} ]] && args+=(-user "$IMG_USER")
	args+=(-env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	(cd "$repo" && nice -n 15 go run ./hack/packimage "${args[@]}") >"$dir/oci/$1.digest" 2>"$dir/logs/pack-$1.log" || {
		echo "make node-images: packing $2 into $dir/oci/$1 failed:" >&2
		sed 's/^/    /' "$dir/logs/pack-$1.log" >&2
		exit 1
	}
}

# common_files <root> <qemu home>: what every KubeVirt image has on top of Debian: the qemu user
# and group 107 (cmd/virt-launcher/BUILD.bazel:80-125, cmd/virt-handler/BUILD.bazel:74-119;
# NonRootUID pkg/util/util.go:30-32), upstream's nsswitch.conf, and /var/run as a relative link
# to ../run: virt-handler reaches a launcher's files through /proc/<pid>/root/var/run, where an
# absolute link would resolve in virt-handler's own root (cmd/virt-launcher/BUILD.bazel:166-178).
common_files() {
	local root=$1 home=$2
	if grep -q '^[^:]*:[^:]*:107:' "$root/etc/passwd" || grep -q '^[^:]*:[^:]*:107:' "$root/etc/group"; then
		echo "make node-images: uid or gid 107 is taken in $root: $(grep ':107:' "$root/etc/passwd" "$root/etc/group")" >&2
		exit 1
	fi
	echo "qemu:x:107:107::$home:/bin/bash" >>"$root/etc/passwd"
	echo "qemu:x:107:" >>"$root/etc/group"
	install -m 0644 "$kvdir/cmd/virt-launcher/nsswitch.conf" "$root/etc/nsswitch.conf"
	rm -rf "$root/var/run"
	ln -s ../run "$root/var/run"
}

customize_launcher() {
	local root=$1 cfg=$kvdir/cmd/virt-launcher
	common_files "$root" /home/qemu
	install -m 0755 "$cfg/node-labeller/node-labeller.sh" "$root/usr/bin/node-labeller.sh"
	install -m 0644 "$cfg/qemu.conf" "$cfg/virtqemud.conf" "$root/etc/libvirt/"
	install -D -m 0755 -o 107 -g 107 "$cfg/qemu" "$root/etc/libvirt/hooks/qemu"
	setcap cap_net_bind_service+ep "$root/usr/bin/virt-launcher-monitor"
	mkdir -p "$root/usr/lib64/qemu-kvm" "$root/home/qemu"
	chown 107:107 "$root/home/qemu"
	# virtqemud: Debian builds it but does not ship it; the shim runs libvirtd under its name.
	install -m 0755 "$here/images/virtqemud" "$root/usr/sbin/virtqemud"
	mkdir -p "$root/usr/libexec/virtqemud"
	ln -s /usr/sbin/libvirtd "$root/usr/libexec/virtqemud/virtqemud"
	# The names KubeVirt looks for under /usr/share/OVMF (pkg/virt-launcher/virtwrap/efi/efi.go:28-33);
	# Debian's ovmf ships the 4 MiB builds under other names.
	ln -s OVMF_CODE_4M.fd "$root/usr/share/OVMF/OVMF_CODE.fd"
	ln -s OVMF_VARS_4M.fd "$root/usr/share/OVMF/OVMF_VARS.fd"
	ln -s OVMF_CODE_4M.secboot.fd "$root/usr/share/OVMF/OVMF_CODE.secboot.fd"
	ln -s OVMF_VARS_4M.ms.fd "$root/usr/share/OVMF/OVMF_VARS.secboot.fd"
	IMG_ENTRYPOINT=(/usr/bin/virt-launcher) IMG_USER=
}

customize_handler() {
	common_files "$1" ""
	IMG_ENTRYPOINT=(/usr/bin/virt-handler) IMG_USER=
}

# virt-api: the static binary on upstream's passwd-image, distroless base with the nonroot-user
# 1001 (BUILD.bazel:181-213; cmd/virt-api/BUILD.bazel:38-55), and the CA bundle distroless has.
customize_api() {
	local root=$1
	mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot-user"
	chmod 1777 "$root/tmp"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot-user:x:1001:1001::/home/nonroot-user:/bin/bash\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnonroot-user:x:1001:\n' >"$root/etc/group"
	install -m 0644 "$dir/build-root/etc/ssl/certs/ca-certificates.crt" "$root/etc/ssl/certs/"
	IMG_ENTRYPOINT=(/usr/bin/virt-api) IMG_USER=1001
}

# cdi-importer: entrypoint and user of CDI v1.64.0 cmd/cdi-importer/BUILD.bazel:34-57.
customize_importer() {
	IMG_ENTRYPOINT=(/usr/bin/cdi-importer -alsologtostderr) IMG_USER=1001
}

# The worker's disk (disk/disk.img): a FAT file system holding Debian's kernel, an initramfs of
# busybox whose init (images/guest-init) says on the serial console that the guest is up, and
# SYSLINUX in its boot sector, which the BIOS boots (SeaBIOS, the firmware of a VM whose spec sets
# none, as the chart's Talos machines do). The initramfs also carries what the guest's own join
# runs: the operating system stand-in (bin/guestos, internal/sim/guestos), the kubelet of
# GUEST_K8S_VERSION (usr/local/lib/kubelet/v<version>/kubelet), and Debian's containerd,
# runc and CNI plugins with the libraries they load. disk/disk-join.img is the same disk whose
# kernel command line says cozy.join=guest: its init hands the join to the stand-in. The packages
# are downloaded in the build root, never installed: their tools run there from where they were
# unpacked. disk/packages lists them.
build_worker_disk() {
	local w=/usr/src/worker-disk
	rm -rf "$dir/build-root$w" "$dir/disk" && mkdir -p "$dir/build-root$w"/{debs,x,initramfs/bin,guest/bin} "$dir/disk"
	cp /etc/resolv.conf "$dir/build-root/etc/resolv.conf"
	install -m 0755 "$here/images/guest-init" "$dir/build-root$w/initramfs/init"
	install -m 0755 "$here/images/guest-dhcp" "$dir/build-root$w/initramfs/bin/dhcp"
	install -m 0755 "$dir/bin/guestos" "$dir/build-root$w/guest/bin/guestos"
	install -D -m 0755 "$dir/bin/kubelet" "$dir/build-root$w/guest/usr/local/lib/kubelet/v$GUEST_K8S_VERSION/kubelet"
	# in a mount namespace with /proc (inroot): SYSLINUX's installer hands mtools /proc/<pid>/fd/<n>
	inroot "$w" sh -ec "
		cd $w/debs
		apt-get update -qq
		kernel=\$(apt-cache depends linux-image-amd64 | awk '\$1 == \"Depends:\" && \$2 ~ /^linux-image-/ { print \$2; exit }')
		apt-get -o APT::Sandbox::User=root download -qq \$kernel $WORKER_DISK_PACKAGES $GUEST_PACKAGES
		for d in *.deb; do dpkg-deb -x \$d $w/x; dpkg-deb -W --showformat='\${Package}=\${Version}\n' \$d; done >$w/packages
		i=$w/initramfs g=$w/guest
		cp $w/x/bin/busybox \$i/bin/ 2>/dev/null || cp $w/x/usr/bin/busybox \$i/bin/
		mkdir -p \$i/proc \$i/sys \$i/dev \$i/lib/modules \$i/etc \$g/usr/bin \$g/opt/cni/bin \$g/lib64 \$g/lib/x86_64-linux-gnu
		# the accounts an OS has (the kubelet reads /etc/passwd at its start)
		printf 'root:x:0:0:root:/root:/bin/sh\\n' >\$i/etc/passwd
		printf 'root:x:0:\\n' >\$i/etc/group
		# virtio-net and what it needs, the ACPI power button's input events, virtio-blk and ISO 9660
		# for the config drive, FAT for the boot disk's guest folder, virtio-rng (under TCG the
		# kernel's own entropy takes minutes, and the kubelet's keys wait for it); for containerd and
		# the pod network: overlayfs, veth, the bridge (with stp and llc). Modules in Debian's kernel
		# (virtio-pci and ACPI are built in).
		for m in net/core/failover drivers/net/net_failover drivers/net/virtio_net drivers/input/evdev drivers/acpi/button drivers/block/virtio_blk drivers/cdrom/cdrom fs/isofs/isofs fs/fat/fat fs/fat/vfat fs/nls/nls_cp437 fs/nls/nls_ascii drivers/char/hw_random/virtio-rng fs/overlayfs/overlay drivers/net/veth net/llc/llc net/802/stp net/bridge/bridge; do
			f=\$(ls $w/x/usr/lib/modules/*/kernel/\$m.ko.xz 2>/dev/null) || { echo \"\$m: built in or missing, not copied\"; continue; }
			\$i/bin/busybox unxz -c \$f >\$i/lib/modules/\${m##*/}.ko
		done
		# The guest folder on the boot disk, which the init copies into the root when the guest joins
		# (kept out of the initramfs, which the BIOS reads slowly under TCG): containerd, its runc
		# shim, runc, the CNI plugins the stand-in's network uses, and the dynamic loader and
		# libraries they link.
		cp $w/x/usr/bin/containerd $w/x/usr/bin/containerd-shim-runc-v2 \$g/usr/bin/
		cp \$(ls $w/x/usr/sbin/runc $w/x/usr/bin/runc 2>/dev/null | head -1) \$g/usr/bin/runc
		cp $w/x/usr/lib/cni/bridge $w/x/usr/lib/cni/host-local $w/x/usr/lib/cni/loopback \$g/opt/cni/bin/
		cp -L $w/x/usr/lib/x86_64-linux-gnu/libc.so.6 $w/x/usr/lib/x86_64-linux-gnu/libseccomp.so.2 \$g/lib/x86_64-linux-gnu/
		cp -L $w/x/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 \$g/lib64/
		cd \$i && find . | $w/x/usr/bin/cpio -o -H newc --quiet | gzip -1 >$w/initrd.img
		cp $w/x/boot/vmlinuz-* $w/vmlinuz
		cfg() { printf 'DEFAULT linux\nPROMPT 0\nTIMEOUT 0\nSERIAL 0 115200\nLABEL linux\n  KERNEL vmlinuz\n  APPEND initrd=initrd.img console=ttyS0,115200 panic=-1%s\n' \"\$1\"; }
		cfg '' >$w/syslinux.cfg
		kib=\$(( \$(du -sk \$g | cut -f1) + (\$(stat -c %s $w/initrd.img) + \$(stat -c %s $w/vmlinuz)) / 1024 + 8192 ))
		$w/x/usr/sbin/mkfs.fat -C $w/disk.img \$kib >/dev/null
		$w/x/usr/bin/mcopy -i $w/disk.img $w/vmlinuz $w/initrd.img $w/syslinux.cfg $w/x/usr/lib/syslinux/modules/bios/ldlinux.c32 ::/
		$w/x/usr/bin/mcopy -s -i $w/disk.img \$g ::/
		PATH=$w/x/usr/bin:\$PATH $w/x/usr/bin/syslinux --install $w/disk.img
		cp $w/disk.img $w/disk-join.img
		cfg ' cozy.join=guest' >$w/syslinux.cfg
		$w/x/usr/bin/mcopy -o -i $w/disk-join.img $w/syslinux.cfg ::/syslinux.cfg
	" >"$dir/logs/worker-disk.log" 2>&1 || {
		echo "make node-images: building the worker's disk in $dir/build-root$w failed:" >&2
		tail -30 "$dir/logs/worker-disk.log" | sed 's/^/    /' >&2
		exit 1
	}
	mv "$dir/build-root$w/disk.img" "$dir/build-root$w/disk-join.img" "$dir/build-root$w/packages" "$dir/disk/"
	rm -rf "$dir/build-root$w"
}

# The worker disk's image, in the layout KubeVirt's container disks and CDI's registry imports
# read: the disk alone under /disk, owned by the qemu user 107 (kubevirt.io/kubevirt v1.8.4
# docs/container-register-disks.md:59-66; CDI v1.64.0 pkg/importer/registry-datasource.go:34-36,
# the folder it copies the disk from).
customize_worker_disk() {
	install -D -m 0644 -o 107 -g 107 "$dir/disk/${WORKER_DISK_FILE:-disk.img}" "$1/disk/disk.img"
	rm -rf "$1/usr"
	IMG_ENTRYPOINT=() IMG_USER=
}

# versions.env: the modules with their sums, the Debian packages that matter with their versions
# (each image's full list is rootfs/<name>.packages), the image digests.
write_versions() {
	pkgver() { awk -F= -v p="$2" '$1 == p { print $2 }' "$dir/rootfs/$1.packages"; }
	cat >"$dir/versions.env.tmp" <<VERSIONS
KUBEVIRT_MODULE=$KUBEVIRT_MODULE
KUBEVIRT_VERSION=v$KUBEVIRT_VERSION
KUBEVIRT_SUM=$kv_sum
CDI_MODULE=$CDI_MODULE
CDI_VERSION=v$CDI_VERSION
CDI_SUM=$cdi_sum
LIBNBD_GO_BINDINGS=libnbd $(chroot "$dir/build-root" dpkg-query -W -f '${source:Version}' libnbd-dev) (Debian source, golang/)
DEBIAN_SUITE=$DEBIAN_SUITE
BUILD_LIBVIRT_DEV=$(chroot "$dir/build-root" dpkg-query -W -f '${Version}' libvirt-dev)
BUILD_LIBNBD_DEV=$(chroot "$dir/build-root" dpkg-query -W -f '${Version}' libnbd-dev)
LIBVIRT=$(pkgver virt-launcher libvirt-daemon-driver-qemu)
QEMU=$(pkgver virt-launcher qemu-system-x86)
QEMU_UTILS=$(pkgver virt-launcher qemu-utils)
OVMF=$(pkgver virt-launcher ovmf)
LIBNBD=$(pkgver virt-launcher libnbd0)
IMPORTER_QEMU_UTILS=$(pkgver cdi-importer qemu-utils)
IMPORTER_NBDKIT=$(pkgver cdi-importer nbdkit)
VIRT_LAUNCHER_IMAGE=$(<"$dir/oci/virt-launcher.digest")
VIRT_HANDLER_IMAGE=$(<"$dir/oci/virt-handler.digest")
VIRT_API_IMAGE=$(<"$dir/oci/virt-api.digest")
CDI_IMPORTER_IMAGE=$(<"$dir/oci/cdi-importer.digest")
WORKER_KERNEL=$(awk -F= '$1 ~ /^linux-image-[0-9]/ { print $1 "=" $2 }' "$dir/disk/packages")
WORKER_DISK_IMAGE=$(<"$dir/oci/worker-disk.digest")
WORKER_DISK_JOIN_IMAGE=$(<"$dir/oci/worker-disk-join.digest")
GUEST_KUBELET=v$GUEST_K8S_VERSION k8s.io/kubernetes $guest_sum
GUEST_CONTAINERD=$(awk -F= '$1 == "containerd" { print $2 }' "$dir/disk/packages")
GUEST_RUNC=$(awk -F= '$1 == "runc" { print $2 }' "$dir/disk/packages")
NODE_IMAGES_KEY=$key
VERSIONS
	mv "$dir/versions.env.tmp" "$dir/versions.env"
}
