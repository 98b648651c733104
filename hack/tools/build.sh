#!/usr/bin/env bash
# Builds the local control plane from source through the Go module proxy:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok,
# into a cache folder outside the work tree, keyed by the pinned versions and go.sum.
#
#   hack/tools/build.sh            build what is missing, print the folder
#   hack/tools/build.sh --print    print the folder only
#
# E2E_TOOLS_DIR overrides the folder. A warm run only checks versions.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
K8S_VERSION=1.35.4
ETCD_VERSION=3.6.5
KWOK_VERSION=0.8.0
K8S_MINOR=$(cut -d. -f2 <<<"$K8S_VERSION")

# The folder is keyed by the pinned versions and both go.sum files: a bump builds anew, the same
# pins on the same machine (a fresh clone included) reuse what is there.
key=$(cat "$here/controlplane/go.sum" "$here/kwok/go.sum" | sha256sum | cut -c1-12)
dir=${E2E_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cozy-e2e/tools/k8s-v$K8S_VERSION-etcd-v$ETCD_VERSION-kwok-v$KWOK_VERSION-$key}

if [[ ${1:-} == --print ]]; then
	echo "$dir"
	exit 0
fi
mkdir -p "$dir"

ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$K8S_MINOR \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=2026-04-15T18:01:22Z \
 -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$K8S_MINOR"

export CGO_ENABLED=0
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
total_start=$(date +%s.%N)
built=0

# reports <binary> <expected version text> <version command...>: the binary is there and says
# the version. Its output is read whole: `| grep -q` would close the pipe early, and pipefail
# would then count the binary's SIGPIPE as a mismatch and rebuild it.
reports() {
	local bin=$1 want=$2 out
	shift 2
	[[ -x $dir/$bin ]] || return 1
	out=$("$dir/$bin" "$@" 2>&1) || true
	[[ $out == *"$want"* ]]
}

# build <binary> <module dir> <package> <ldflags> <expected version text> <version command...>
build() {
	local bin=$1 mod=$2 pkg=$3 flags=$4 want=$5
	shift 5
	if reports "$bin" "$want" "$@"; then
		printf '  %-24s up to date (%s)\n' "$bin" "$want"
		return
	fi
	local start log
	start=$(date +%s.%N)
	log=$(mktemp)
	printf '  %-24s building %s ...\n' "$bin" "$pkg"
	if ! (cd "$here/$mod" && go build -trimpath -ldflags="$flags" -o "$dir/$bin.tmp" "$pkg") >"$log" 2>&1; then
		echo "make tools: building $bin ($pkg in hack/tools/$mod) failed:" >&2
		sed 's/^/    /' "$log" >&2
		rm -f "$log" "$dir/$bin.tmp"
		exit 1
	fi
	rm -f "$log"
	mv "$dir/$bin.tmp" "$dir/$bin"
	if ! reports "$bin" "$want" "$@"; then
		echo "make tools: $bin was built but '$bin $*' does not report $want:" >&2
		"$dir/$bin" "$@" 2>&1 | head -3 | sed 's/^/    /' >&2
		exit 1
	fi
	printf '  %-24s built in %ss\n' "$bin" "$(since "$start")"
	built=$((built + 1))
}

echo "make tools: $dir"
build kube-apiserver controlplane k8s.io/kubernetes/cmd/kube-apiserver "$ldflags" "v$K8S_VERSION" --version
build kube-controller-manager controlplane k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags" "v$K8S_VERSION" --version
build kube-scheduler controlplane k8s.io/kubernetes/cmd/kube-scheduler "$ldflags" "v$K8S_VERSION" --version
build kubectl controlplane k8s.io/kubernetes/cmd/kubectl "$ldflags" "v$K8S_VERSION" version --client
build etcd controlplane go.etcd.io/etcd/server/v3 "-s -w" "etcd Version: $ETCD_VERSION" --version
build kwok kwok sigs.k8s.io/kwok/cmd/kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v$KWOK_VERSION" "$KWOK_VERSION" --version

# kwok has no built-in stages; the upstream "fast" stages ship in its module.
stages=$dir/kwok-stages.yaml
if [[ ! -s $stages ]]; then
	kwokdir=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
	{
		first=1
		for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
			pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
			((first)) || echo '---'
			first=0
			cat "$kwokdir/kustomize/stage/$f"
		done
	} >"$stages.tmp"
	mv "$stages.tmp" "$stages"
	echo "  kwok-stages.yaml         written from sigs.k8s.io/kwok@v$KWOK_VERSION"
fi

cat >"$dir/versions.env" <<VERSIONS
K8S_VERSION=v$K8S_VERSION
ETCD_VERSION=v$ETCD_VERSION
KWOK_VERSION=v$KWOK_VERSION
VERSIONS
printf 'make tools: %d built, done in %ss\n' "$built" "$(since "$total_start")"
