#!/usr/bin/env bash
# Builds what the sim's real Node runs beside the Debian containerd and runc: the kubelet v1.35.4
# from k8s.io/kubernetes (its own tools module, hack/tools/node) and the pause binary from the
# same module's build/pause/linux/pause.c. They go into a folder of their own, keyed by
# hack/tools/node/go.sum and the pins below only, so a change here never rebuilds the control
# plane and the controllers hack/tools/build.sh keeps (and the other way round).
#
#   hack/tools/build-node.sh            build what is missing, print the folder
#   hack/tools/build-node.sh --print    print the folder only
#
# E2E_NODE_TOOLS_DIR overrides the folder. A warm run only checks versions.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
K8S_VERSION=1.35.4
K8S_MINOR=$(cut -d. -f2 <<<"$K8S_VERSION")
# The pause image's version at that tag: k8s.io/kubernetes v1.35.4 build/pause/Makefile:20
# (TAG ?= 3.10.1), the one kubeadm v1.35.4 names (cmd/kubeadm/app/constants/constants.go:444-445).
PAUSE_VERSION=3.10.1

key=$({
	cat "$here/node/go.sum"
	echo "k8s=$K8S_VERSION pause=$PAUSE_VERSION"
} | sha256sum | cut -c1-12)
dir=${E2E_NODE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cozy-e2e/tools/node-k8s-v$K8S_VERSION-pause-$PAUSE_VERSION-$key}

if [[ ${1:-} == --print ]]; then
	echo "$dir"
	exit 0
fi
mkdir -p "$dir"
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
total_start=$(date +%s.%N)
built=0
echo "make node-tools: $dir"

# The kubelet. Upstream builds it with cgo (k8s.io/kubernetes v1.35.4 hack/lib/golang.sh:319-367:
# kubelet is not in KUBE_STATIC_BINARIES); here it is static (CGO_ENABLED=0), as hack/tools/build.sh
# builds the control plane: every package it shares with kube-apiserver then comes from the same
# build cache, where a cgo build compiles all of them again (measured on 2 loaded cores: more than
# 45 minutes unfinished, against minutes). The kubelet's cgo is optional: without it the kubelet
# runs a static Pod through containerd here (infra-here.md, measured). pause is C.
# Without gcc a machine outside CI skips the node's tools: the real Node's test skips there too
# (it needs containerd and runc, which such a machine lacks as well), and make test keeps needing
# Go alone. Under CI it is an error, as the test's own missing pieces are.
command -v gcc >/dev/null || {
	if [[ -n ${CI:-} ]]; then
		echo "make node-tools: gcc is missing (pause is C, static); apt-get install -y gcc libc6-dev" >&2
		exit 2
	fi
	echo "make node-tools: skipped, gcc is missing (pause is C, static; the real Node's test skips without containerd and runc too); apt-get install -y gcc libc6-dev containerd runc containernetworking-plugins to build and run it"
	exit 0
}
# The kubelet and kube-proxy (a kubeadm node runs kube-proxy beside its kubelet; here it carries
# the Service addresses of the apiserver to the Pods that dial it in cluster), in one go build so
# their shared packages compile once.
stale=()
for b in kubelet kube-proxy; do
	out=$("$dir/$b" --version 2>&1 || true)
	if [[ $out == "Kubernetes v$K8S_VERSION" ]]; then
		printf '  %-10s up to date (v%s)\n' "$b" "$K8S_VERSION"
	else
		stale+=("$b")
	fi
done
if ((${#stale[@]})); then
	start=$(date +%s.%N)
	printf '  %-10s building from k8s.io/kubernetes v%s ...\n' "${stale[*]}" "$K8S_VERSION"
	ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$K8S_MINOR \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=2026-04-15T18:01:22Z"
	log=$(mktemp)
	tmp=$(mktemp -d "$dir/.build.XXXXXX")
	pkgs=()
	for b in "${stale[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
	if ! (cd "$here/node" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$tmp/" "${pkgs[@]}") >"$log" 2>&1; then
		echo "make node-tools: building ${stale[*]} (hack/tools/node) failed:" >&2
		sed 's/^/    /' "$log" >&2
		rm -rf "$log" "$tmp"
		exit 1
	fi
	rm -f "$log"
	for b in "${stale[@]}"; do mv "$tmp/$b" "$dir/$b"; done
	rmdir "$tmp"
	printf '  %-10s built in %ss\n' "${stale[*]}" "$(since "$start")"
	built=$((built + ${#stale[@]}))
fi

# pause, as build/pause/Makefile:49 compiles it (CFLAGS = -Os -Wall -Werror -static
# -DVERSION=v$(TAG)-$(REV); REV is a git description, which a module zip has not: "module").
kdir=$(cd "$here/node" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
out=$("$dir/pause" -v 2>&1 || true)
if [[ $out == *"v$PAUSE_VERSION-module"* ]]; then
	printf '  %-10s up to date (v%s)\n' pause "$PAUSE_VERSION"
else
	start=$(date +%s.%N)
	gcc -Os -Wall -Werror -static "-DVERSION=v$PAUSE_VERSION-module" -o "$dir/pause.tmp" "$kdir/build/pause/linux/pause.c"
	mv "$dir/pause.tmp" "$dir/pause"
	printf '  %-10s built in %ss\n' pause "$(since "$start")"
	built=$((built + 1))
fi

kubelet_sum=$(awk -v v="v$K8S_VERSION" '$1 == "k8s.io/kubernetes" && $2 == v { print $3 }' "$here/node/go.sum")
cat >"$dir/versions.env" <<VERSIONS
K8S_VERSION=v$K8S_VERSION
KUBERNETES_MODULE=k8s.io/kubernetes
KUBERNETES_SUM=$kubelet_sum
PAUSE_VERSION=$PAUSE_VERSION
NODE_TOOLS_KEY=$key
VERSIONS
printf 'make node-tools: %d built, done in %ss\n' "$built" "$(since "$total_start")"
