#!/usr/bin/env bash
# Builds the local control plane from source through the Go module proxy:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok,
# and the upstream controllers the sim runs as processes: Cluster API's KubeVirt provider
# (capk-manager), the Talos bootstrap provider (cabpt-manager) and Flux's helm-controller;
# KubeVirt's virt-controller and install-strategy (what virt-operator installs for a KubeVirt CR);
# and materialises the Cozystack Kubernetes chart from the cozystack module zip.
# Everything goes into a cache folder outside the work tree, keyed by the pinned versions and
# every tools module's go.sum.
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
# Upstream controllers, each built from its own tools module (hack/tools/<name>) at this tag.
CAPK_MODULE=sigs.k8s.io/cluster-api-provider-kubevirt
CAPK_VERSION=0.1.10
CABPT_MODULE=github.com/siderolabs/cluster-api-bootstrap-provider-talos
CABPT_VERSION=0.6.12
HELM_CONTROLLER_MODULE=github.com/fluxcd/helm-controller
HELM_CONTROLLER_VERSION=1.6.2
# KubeVirt's virt-controller (hack/tools/virt-controller: the module with its staging modules at the
# same tag, kubevirt.io/kubevirt v1.8.4 go.mod's other replace pins), and install-strategy, a program
# of the tools module that prints what virt-operator installs for a KubeVirt CR.
VIRT_CONTROLLER_MODULE=kubevirt.io/kubevirt
VIRT_CONTROLLER_VERSION=1.8.4
# Modules only downloaded, for their files: the Cozystack release whose packages/apps/kubernetes
# chart the sim renders (and the platform's own CRDs it ships), source-controller at the API
# version helm-controller requires (its CRDs: ExternalArtifact, HelmChart, OCIRepository), and
# Cilium and KubeVirt at the versions Cozystack ships (the CiliumNetworkPolicy CRD; the schema
# virt-operator gives VirtualMachineClusterInstancetype, which the chart looks up). Their module
# sums are pinned here, as go.sum pins the others; go mod download also checks them against the
# checksum database.
COZYSTACK_MODULE=github.com/cozystack/cozystack
COZYSTACK_VERSION=1.6.1
COZYSTACK_SUM=h1:guBFQT9dW3oN/Bzo97PUs9KtObUhwFgTlqG1raAJ1h8=
SOURCE_CONTROLLER_MODULE=github.com/fluxcd/source-controller
SOURCE_CONTROLLER_VERSION=1.9.0
SOURCE_CONTROLLER_SUM=h1:5msg2yyjVYDULZos+2ve8MZzcSqTpusiXmrOeBhc9yY=
CILIUM_MODULE=github.com/cilium/cilium
CILIUM_VERSION=1.19.5
CILIUM_SUM=h1:R4tqIO3wwjzr5TnPw5cSbUhdMIjMAoHhtjNvO/hIZ+Q=
KUBEVIRT_MODULE=kubevirt.io/kubevirt
KUBEVIRT_VERSION=1.8.4
KUBEVIRT_SUM=h1:TXpT+U1SBIlsNI62qOev2aNkYVnGgyZ21gvmakIARrg=
# CDI's controller (hack/tools/cdi-controller): the checksum database does not list the module,
# so its go.sum entry is the only pin (GONOSUMDB for that module alone).
CDI_MODULE=kubevirt.io/containerized-data-importer
CDI_VERSION=1.64.0
export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}$CDI_MODULE

# The pins, one record each, in the order versions.env lists them (internal/sim/realupstream's
# components follow it): <VAR> <tools module | -> [<path kept>...]. VAR names the pin's variables
# above: <VAR>_MODULE, <VAR>_VERSION and, for a module only downloaded (tools module "-"),
# <VAR>_SUM; a tools module's go.sum pins the others' sums. The paths (files or folders relative
# to the module root) are kept in the tools folder (keep, below).
pins=(
	# Provider CRDs, the labels their kustomizations add and their webhook configurations.
	"CAPK capk config/crd/bases config/crd/kustomization.yaml config/webhook/manifests.yaml"
	"CABPT cabpt config/crd/bases config/crd/kustomization.yaml config/webhook/manifests.yaml"
	"HELM_CONTROLLER helm-controller config/crd/bases"
	"VIRT_CONTROLLER virt-controller"
	# The Kubernetes chart and its library, the platform's own CRDs the chart renders objects of:
	# WorkloadMonitor (cozystack-controller), cert-manager's (as the platform's cert-manager-crds
	# chart templates them), KamajiControlPlane (in the Kamaji control plane provider's components)
	# and the Keycloak operator's KeycloakClient and KeycloakClientScope (the chart's
	# oidc-bootstrap hook deletes its own of them), and the KubeVirt instance types the platform
	# installs, which the chart looks up by name; the platform's KubeVirt CR (its kubevirt package,
	# with the platform values it is rendered with) and virt-operator's Deployment (its environment
	# names the images virt-operator installs).
	"COZYSTACK - packages/apps/kubernetes packages/library/cozy-lib \
		packages/system/cozystack-controller/definitions/cozystack.io_workloadmonitors.yaml \
		packages/system/cert-manager-crds/templates \
		packages/system/capi-providers-cpprovider/files/control-plane-components.yaml \
		packages/system/kubevirt-instancetypes/templates/instancetypes.yaml \
		packages/system/kubevirt/templates/kubevirt-cr.yaml packages/system/kubevirt/values.yaml \
		packages/system/kubevirt-operator/templates/kubevirt-operator.yaml packages/core/platform/values.yaml \
		packages/system/keycloak-operator/charts/keycloak-operator/crds/v1.edp.epam.com_keycloakclients.yaml \
		packages/system/keycloak-operator/charts/keycloak-operator/crds/v1.edp.epam.com_keycloakclientscopes.yaml"
	"SOURCE_CONTROLLER - config/crd/bases"
	"CILIUM - pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml"
	# virt-operator makes its CRDs at run time; their schemas are Go string literals there.
	"KUBEVIRT - pkg/virt-operator/resource/generate/components/validations_generated.go"
	# The CRDs cdi-operator makes from the YAML in pkg/operator/resources/crds_generated.go
	# (pkg/operator/resources/cluster/*.go decode them from it).
	"CDI cdi-controller pkg/operator/resources/crds_generated.go"
)

# The binaries built from the pinned modules, in build order: <binary> <VAR> <package>, where the
# package is the module's root (-), a folder of the module, or ./<folder>, a program of the pin's
# tools module itself, checked by the module it was built with (built_with) rather than from
# (built_from).
bins=(
	# The upstream controllers: each main package is its module's root, built as a dependency of
	# its tools module (their own replace directives are repeated there).
	"capk-manager CAPK -"
	"cabpt-manager CABPT -"
	"helm-controller HELM_CONTROLLER -"
	# CDI v1.64.0's controller.
	"cdi-controller CDI cmd/cdi-controller"
	# KubeVirt: virt-controller from its module; install-strategy is the tools module's own
	# program, checked by the kubevirt.io/kubevirt it was built with.
	"virt-controller VIRT_CONTROLLER cmd/virt-controller"
	"install-strategy VIRT_CONTROLLER ./install-strategy"
)

# pin <VAR>: sets mod and ver to the pin's module and version (with its v), tmod to its tools
# module (- for a module only downloaded).
pin() {
	local m=${1}_MODULE v=${1}_VERSION p
	mod=${!m} ver=v${!v} tmod=
	for p in "${pins[@]}"; do
		if [[ ${p%% *} == "$1" ]]; then
			read -r _ tmod _ <<<"$p"
			return
		fi
	done
}

# The tools modules: the control plane's and kwok's, then those the binaries are built in.
modules=(controlplane kwok)
for b in "${bins[@]}"; do
	read -r _ var _ <<<"$b"
	pin "$var"
	[[ " ${modules[*]} " == *" $tmod "* ]] || modules+=("$tmod")
done

# The folder is keyed by the pinned versions, every tools module's go.sum and the pinned sums of
# the modules only downloaded: a bump builds anew, the same pins on the same machine (a fresh
# clone included) reuse what is there. Its name spells the versions of what is built and of the
# chart.
key=$({
	for m in "${modules[@]}"; do cat "$here/$m/go.sum"; done
	for b in "${bins[@]}"; do
		read -r _ var pkg <<<"$b"
		pin "$var"
		if [[ $pkg == ./* ]]; then cat "$here/$tmod/${pkg#./}"/*.go; fi
	done
	for p in "${pins[@]}"; do
		read -r var _ <<<"$p"
		pin "$var"
		s=${var}_SUM
		if [[ $tmod == - ]]; then echo "$mod $ver ${!s}"; fi
	done
} | sha256sum | cut -c1-12)
name=k8s-v$K8S_VERSION-etcd-v$ETCD_VERSION-kwok-v$KWOK_VERSION
name+=-capk-v$CAPK_VERSION-cabpt-v$CABPT_VERSION-helm-controller-v$HELM_CONTROLLER_VERSION-cozystack-v$COZYSTACK_VERSION
name+=-cdi-v$CDI_VERSION-kubevirt-v$VIRT_CONTROLLER_VERSION
dir=${E2E_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cozy-e2e/tools/$name-$key}

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

# module_sum <tools module dir> <module> <version>: the h1 sum the tools module's go.sum pins
# for the module's zip.
module_sum() {
	awk -v m="$2" -v v="$3" '$1 == m && $2 == v { print $3 }' "$here/$1/go.sum"
}

# built_from <binary> <module> <version> <sum>: the binary's build information says its main
# package came from the module at the version and sum go.sum pins. The upstream controllers have
# no version flag; their build information is exact, and `go version -m` reads it without running
# them.
built_from() {
	local bin=$1 mod=$2 ver=$3 sum=$4 out
	[[ -x $dir/$bin && -n $sum ]] || return 1
	out=$(go version -m "$dir/$bin" 2>/dev/null) || return 1
	[[ $out == *$'\tmod\t'"$mod"$'\t'"$ver"$'\t'"$sum"* ]]
}

# built_with <binary> <module> <version> <sum>: the binary's build information lists the module at
# the version and sum go.sum pins as a dependency (a program of a tools module itself).
built_with() {
	local bin=$1 mod=$2 ver=$3 sum=$4 out
	[[ -x $dir/$bin && -n $sum ]] || return 1
	out=$(go version -m "$dir/$bin" 2>/dev/null) || return 1
	[[ $out == *$'\tdep\t'"$mod"$'\t'"$ver"$'\t'"$sum"* ]]
}

# build <binary> <module dir> <package> <ldflags> <what> <check...>: builds the binary unless
# the check (a command, such as reports or built_from) says it is what is pinned; <what> names
# the pin in the output.
build() {
	local bin=$1 mod=$2 pkg=$3 flags=$4 want=$5
	shift 5
	if "$@"; then
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
	if ! "$@"; then
		echo "make tools: $bin was built but is not $want (check: $*)" >&2
		exit 1
	fi
	printf '  %-24s built in %ss\n' "$bin" "$(since "$start")"
	built=$((built + 1))
}

echo "make tools: $dir"
build kube-apiserver controlplane k8s.io/kubernetes/cmd/kube-apiserver "$ldflags" "v$K8S_VERSION" \
	reports kube-apiserver "v$K8S_VERSION" --version
build kube-controller-manager controlplane k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags" "v$K8S_VERSION" \
	reports kube-controller-manager "v$K8S_VERSION" --version
build kube-scheduler controlplane k8s.io/kubernetes/cmd/kube-scheduler "$ldflags" "v$K8S_VERSION" \
	reports kube-scheduler "v$K8S_VERSION" --version
build kubectl controlplane k8s.io/kubernetes/cmd/kubectl "$ldflags" "v$K8S_VERSION" \
	reports kubectl "v$K8S_VERSION" version --client
build etcd controlplane go.etcd.io/etcd/server/v3 "-s -w" "etcd Version: $ETCD_VERSION" \
	reports etcd "etcd Version: $ETCD_VERSION" --version
build kwok kwok sigs.k8s.io/kwok/cmd/kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v$KWOK_VERSION" "$KWOK_VERSION" \
	reports kwok "$KWOK_VERSION" --version

# Each pin's sum: its tools module's go.sum's, or the one pinned above for a module only
# downloaded.
declare -A sum
for p in "${pins[@]}"; do
	read -r var _ <<<"$p"
	pin "$var"
	s=${var}_SUM
	if [[ $tmod == - ]]; then sum[$var]=${!s}; else sum[$var]=$(module_sum "$tmod" "$mod" "$ver"); fi
done

for b in "${bins[@]}"; do
	read -r bin var pkg <<<"$b"
	pin "$var"
	check=built_from
	case $pkg in
	-) pkg=$mod ;;
	./*) check=built_with ;;
	*) pkg=$mod/$pkg ;;
	esac
	build "$bin" "$tmod" "$pkg" "-s -w" "$mod $ver" "$check" "$bin" "$mod" "$ver" "${sum[$var]}"
done

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

# module_dir <tools module dir | -> <module> <version> <pinned sum>: downloads the module and prints
# its folder in the module cache. In a tools module the version and sum are go.sum's; with "-" the
# download runs outside any module (no go.mod or go.sum is touched) and its sum must be the pinned
# one.
module_dir() {
	local tmod=$1 mod=$2 ver=$3 pin=$4 json got
	if [[ $tmod == - ]]; then
		json=$(cd / && go mod download -json "$mod@$ver" 2>&1) || {
			echo "make tools: downloading $mod@$ver failed:" >&2
			sed 's/^/    /' <<<"$json" >&2
			return 1
		}
	else
		json=$(cd "$here/$tmod" && go mod download -json "$mod" 2>&1) || {
			echo "make tools: downloading $mod (hack/tools/$tmod) failed:" >&2
			sed 's/^/    /' <<<"$json" >&2
			return 1
		}
	fi
	got=$(sed -n 's/^\t"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
	if [[ $got != "$pin" ]]; then
		echo "make tools: $mod@$ver has sum '$got', hack/tools/build.sh pins '$pin'" >&2
		return 1
	fi
	sed -n 's/^\t"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json"
}

# keep <tools module dir | -> <module> <version> <pinned sum> <path...>: copies those files or
# folders (relative to the module root) into src/<module>@<version>/ of the tools folder, once for
# a given list of paths (.complete holds it: a longer list copies again).
# internal/sim/realupstream reads the CRDs and the chart from there, so they are the very files of the
# pinned modules and outlive a cleaned module cache.
keep() {
	local tmod=$1 mod=$2 ver=$3 pin=$4 src out p
	shift 4
	out=$dir/src/$mod@$ver
	[[ -f $out/.complete && $(<"$out/.complete") == "$*" ]] && return
	src=$(module_dir "$tmod" "$mod" "$ver" "$pin") || exit 1
	rm -rf "$out"
	for p in "$@"; do
		mkdir -p "$(dirname "$out/$p")"
		cp -R "$src/$p" "$out/$p"
	done
	chmod -R u+w "$out" # the module cache is read-only
	printf '%s' "$*" >"$out/.complete"
	printf '  %-24s %s\n' "src/${mod##*/}@$ver" "$*"
}

for p in "${pins[@]}"; do
	read -ra f <<<"$p"
	((${#f[@]} > 2)) || continue
	pin "${f[0]}"
	keep "$tmod" "$mod" "$ver" "${sum[${f[0]}]}" "${f[@]:2}"
done

# The chart as Cozystack's repository has it: its charts/cozy-lib is a symlink to
# ../../../library/cozy-lib (cozystack v1.6.1, git mode 120000), which module zips do not keep; it
# is a copy here, so the folder packs into a chart archive as it is.
chart=$dir/charts/kubernetes
if [[ ! -s $chart/charts/cozy-lib/Chart.yaml ]]; then
	cz=$dir/src/$COZYSTACK_MODULE@v$COZYSTACK_VERSION/packages
	rm -rf "$dir/charts.tmp" "$dir/charts"
	mkdir -p "$dir/charts.tmp/kubernetes/charts"
	cp -R "$cz/apps/kubernetes/." "$dir/charts.tmp/kubernetes/"
	cp -R "$cz/library/cozy-lib" "$dir/charts.tmp/kubernetes/charts/cozy-lib"
	mv "$dir/charts.tmp" "$dir/charts"
	echo "  charts/kubernetes        packages/apps/kubernetes with charts/cozy-lib from packages/library/cozy-lib"
fi

# What a run lists as the upstream pieces it ran (internal/sim/realupstream reads it): the control
# plane's versions, each pin's module, version and sum, and the folder's key (before CDI's lines,
# where it stood when CDI was pinned).
{
	printf '%s\n' "K8S_VERSION=v$K8S_VERSION" "ETCD_VERSION=v$ETCD_VERSION" "KWOK_VERSION=v$KWOK_VERSION"
	for p in "${pins[@]}"; do
		read -r var _ <<<"$p"
		pin "$var"
		if [[ $var == CDI ]]; then echo "TOOLS_KEY=$key"; fi
		printf '%s\n' "${var}_MODULE=$mod" "${var}_VERSION=$ver" "${var}_SUM=${sum[$var]}"
	done
} >"$dir/versions.env"
printf 'make tools: %d built, done in %ss\n' "$built" "$(since "$total_start")"
