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
modules=(controlplane kwok capk cabpt helm-controller)
# CDI's controller (hack/tools/cdi-controller): the checksum database does not list the module,
# so its go.sum entry is the only pin (GONOSUMDB for that module alone).
CDI_MODULE=kubevirt.io/containerized-data-importer
CDI_VERSION=1.64.0
modules+=(cdi-controller)
export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}$CDI_MODULE
modules+=(virt-controller)
downloads=(
	"$COZYSTACK_MODULE v$COZYSTACK_VERSION $COZYSTACK_SUM"
	"$SOURCE_CONTROLLER_MODULE v$SOURCE_CONTROLLER_VERSION $SOURCE_CONTROLLER_SUM"
	"$CILIUM_MODULE v$CILIUM_VERSION $CILIUM_SUM"
	"$KUBEVIRT_MODULE v$KUBEVIRT_VERSION $KUBEVIRT_SUM"
)

# The folder is keyed by the pinned versions, every tools module's go.sum and the pinned sums of
# the modules only downloaded: a bump builds anew, the same pins on the same machine (a fresh
# clone included) reuse what is there. Its name spells the versions of what is built and of the
# chart.
key=$({
	for m in "${modules[@]}"; do cat "$here/$m/go.sum"; done
	cat "$here"/virt-controller/install-strategy/*.go
	printf '%s\n' "${downloads[@]}"
} | sha256sum | cut -c1-12)
name=k8s-v$K8S_VERSION-etcd-v$ETCD_VERSION-kwok-v$KWOK_VERSION
name+=-capk-v$CAPK_VERSION-cabpt-v$CABPT_VERSION-helm-controller-v$HELM_CONTROLLER_VERSION-cozystack-v$COZYSTACK_VERSION
name+=-cdi-v$CDI_VERSION
name+=-kubevirt-v$VIRT_CONTROLLER_VERSION
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

# The upstream controllers: each main package is its module's root, built as a dependency of its
# tools module (their own replace directives are repeated there).
capk_sum=$(module_sum capk "$CAPK_MODULE" "v$CAPK_VERSION")
cabpt_sum=$(module_sum cabpt "$CABPT_MODULE" "v$CABPT_VERSION")
helm_controller_sum=$(module_sum helm-controller "$HELM_CONTROLLER_MODULE" "v$HELM_CONTROLLER_VERSION")
build capk-manager capk "$CAPK_MODULE" "-s -w" "$CAPK_MODULE v$CAPK_VERSION" \
	built_from capk-manager "$CAPK_MODULE" "v$CAPK_VERSION" "$capk_sum"
build cabpt-manager cabpt "$CABPT_MODULE" "-s -w" "$CABPT_MODULE v$CABPT_VERSION" \
	built_from cabpt-manager "$CABPT_MODULE" "v$CABPT_VERSION" "$cabpt_sum"
build helm-controller helm-controller "$HELM_CONTROLLER_MODULE" "-s -w" "$HELM_CONTROLLER_MODULE v$HELM_CONTROLLER_VERSION" \
	built_from helm-controller "$HELM_CONTROLLER_MODULE" "v$HELM_CONTROLLER_VERSION" "$helm_controller_sum"

# CDI v1.64.0's controller (cmd/cdi-controller), and the CRDs cdi-operator makes from the YAML in
# pkg/operator/resources/crds_generated.go (pkg/operator/resources/cluster/*.go decode them from it).
cdi_sum=$(module_sum cdi-controller "$CDI_MODULE" "v$CDI_VERSION")
build cdi-controller cdi-controller "$CDI_MODULE/cmd/cdi-controller" "-s -w" "$CDI_MODULE v$CDI_VERSION" \
	built_from cdi-controller "$CDI_MODULE" "v$CDI_VERSION" "$cdi_sum"

# KubeVirt: virt-controller from its module; install-strategy is the tools module's own program,
# checked by the kubevirt.io/kubevirt it was built with.
virt_controller_sum=$(module_sum virt-controller "$VIRT_CONTROLLER_MODULE" "v$VIRT_CONTROLLER_VERSION")
build virt-controller virt-controller "$VIRT_CONTROLLER_MODULE/cmd/virt-controller" "-s -w" "$VIRT_CONTROLLER_MODULE v$VIRT_CONTROLLER_VERSION" \
	built_from virt-controller "$VIRT_CONTROLLER_MODULE" "v$VIRT_CONTROLLER_VERSION" "$virt_controller_sum"
build install-strategy virt-controller ./install-strategy "-s -w" "$VIRT_CONTROLLER_MODULE v$VIRT_CONTROLLER_VERSION" \
	built_with install-strategy "$VIRT_CONTROLLER_MODULE" "v$VIRT_CONTROLLER_VERSION" "$virt_controller_sum"

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
# internal/sim/upstream reads the CRDs and the chart from there, so they are the very files of the
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

# Provider CRDs, the labels their kustomizations add and their webhook configurations.
keep capk "$CAPK_MODULE" "v$CAPK_VERSION" "$capk_sum" config/crd/bases config/crd/kustomization.yaml config/webhook/manifests.yaml
keep cabpt "$CABPT_MODULE" "v$CABPT_VERSION" "$cabpt_sum" config/crd/bases config/crd/kustomization.yaml config/webhook/manifests.yaml
keep helm-controller "$HELM_CONTROLLER_MODULE" "v$HELM_CONTROLLER_VERSION" "$helm_controller_sum" config/crd/bases
keep - "$SOURCE_CONTROLLER_MODULE" "v$SOURCE_CONTROLLER_VERSION" "$SOURCE_CONTROLLER_SUM" config/crd/bases
keep - "$CILIUM_MODULE" "v$CILIUM_VERSION" "$CILIUM_SUM" pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml
# virt-operator makes its CRDs at run time; their schemas are Go string literals there.
keep - "$KUBEVIRT_MODULE" "v$KUBEVIRT_VERSION" "$KUBEVIRT_SUM" pkg/virt-operator/resource/generate/components/validations_generated.go
keep cdi-controller "$CDI_MODULE" "v$CDI_VERSION" "$cdi_sum" pkg/operator/resources/crds_generated.go
# The Kubernetes chart and its library, the platform's own CRDs the chart renders objects of:
# WorkloadMonitor (cozystack-controller), cert-manager's (as the platform's cert-manager-crds chart
# templates them), KamajiControlPlane (in the Kamaji control plane provider's components) and the
# Keycloak operator's KeycloakClient and KeycloakClientScope (the chart's oidc-bootstrap hook
# deletes its own of them), and the KubeVirt instance types the platform installs, which the chart
# looks up by name; the platform's KubeVirt CR (its kubevirt package, with the platform values it is
# rendered with) and virt-operator's Deployment (its environment names the images virt-operator
# installs).
keep - "$COZYSTACK_MODULE" "v$COZYSTACK_VERSION" "$COZYSTACK_SUM" \
	packages/apps/kubernetes packages/library/cozy-lib \
	packages/system/cozystack-controller/definitions/cozystack.io_workloadmonitors.yaml \
	packages/system/cert-manager-crds/templates \
	packages/system/capi-providers-cpprovider/files/control-plane-components.yaml \
	packages/system/kubevirt-instancetypes/templates/instancetypes.yaml \
	packages/system/kubevirt/templates/kubevirt-cr.yaml packages/system/kubevirt/values.yaml \
	packages/system/kubevirt-operator/templates/kubevirt-operator.yaml packages/core/platform/values.yaml \
	packages/system/keycloak-operator/charts/keycloak-operator/crds/v1.edp.epam.com_keycloakclients.yaml \
	packages/system/keycloak-operator/charts/keycloak-operator/crds/v1.edp.epam.com_keycloakclientscopes.yaml

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

# What a run lists as the upstream pieces it ran (internal/sim/upstream reads it).
cat >"$dir/versions.env" <<VERSIONS
K8S_VERSION=v$K8S_VERSION
ETCD_VERSION=v$ETCD_VERSION
KWOK_VERSION=v$KWOK_VERSION
CAPK_MODULE=$CAPK_MODULE
CAPK_VERSION=v$CAPK_VERSION
CAPK_SUM=$capk_sum
CABPT_MODULE=$CABPT_MODULE
CABPT_VERSION=v$CABPT_VERSION
CABPT_SUM=$cabpt_sum
HELM_CONTROLLER_MODULE=$HELM_CONTROLLER_MODULE
HELM_CONTROLLER_VERSION=v$HELM_CONTROLLER_VERSION
HELM_CONTROLLER_SUM=$helm_controller_sum
VIRT_CONTROLLER_MODULE=$VIRT_CONTROLLER_MODULE
VIRT_CONTROLLER_VERSION=v$VIRT_CONTROLLER_VERSION
VIRT_CONTROLLER_SUM=$virt_controller_sum
COZYSTACK_MODULE=$COZYSTACK_MODULE
COZYSTACK_VERSION=v$COZYSTACK_VERSION
COZYSTACK_SUM=$COZYSTACK_SUM
SOURCE_CONTROLLER_MODULE=$SOURCE_CONTROLLER_MODULE
SOURCE_CONTROLLER_VERSION=v$SOURCE_CONTROLLER_VERSION
SOURCE_CONTROLLER_SUM=$SOURCE_CONTROLLER_SUM
CILIUM_MODULE=$CILIUM_MODULE
CILIUM_VERSION=v$CILIUM_VERSION
CILIUM_SUM=$CILIUM_SUM
KUBEVIRT_MODULE=$KUBEVIRT_MODULE
KUBEVIRT_VERSION=v$KUBEVIRT_VERSION
KUBEVIRT_SUM=$KUBEVIRT_SUM
TOOLS_KEY=$key
VERSIONS
cat >>"$dir/versions.env" <<VERSIONS
CDI_MODULE=$CDI_MODULE
CDI_VERSION=v$CDI_VERSION
CDI_SUM=$cdi_sum
VERSIONS
printf 'make tools: %d built, done in %ss\n' "$built" "$(since "$total_start")"
