#!/usr/bin/env bash
# Regenerates the sim's provider CRDs under fixtures/crds from upstream Go types:
#   kubevirt.io (VirtualMachine, VirtualMachineInstance)  kubevirt.io/api (version in go.mod)
#   cdi.kubevirt.io (DataVolume)                           kubevirt.io/containerized-data-importer-api (go.mod)
#   bootstrap.cluster.x-k8s.io Talos (v1alpha3)            siderolabs/cluster-api-bootstrap-provider-talos, release-0.6
#   bootstrap.cluster.x-k8s.io Kairos (v1beta2)            kairos-io/cluster-api-provider-kairos, main
# and copies CAPK's (infrastructure.cluster.x-k8s.io) from the sigs.k8s.io/cluster-api-provider-kubevirt
# module, which ships them. hack/simcrds/main.go then adds what the upstream kustomizations and
# operators add (contract labels, status subresource, short names, columns) and a header.
#
# usage: hack/simcrds/generate.sh <talos checkout (release-0.6)> <kairos checkout>
set -euo pipefail
talos=${1:?talos bootstrap provider checkout}; kairos=${2:?kairos provider checkout}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
CONTROLLER_TOOLS=${CONTROLLER_TOOLS:-v0.19.0}
CAPK=${CAPK:-v0.1.10}
GOBIN=$work/bin go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS"

kv=$(cd "$root" && go list -m -f '{{.Version}}' kubevirt.io/api)
cdi=$(cd "$root" && go list -m -f '{{.Version}}' kubevirt.io/containerized-data-importer-api)
capi=$(cd "$root" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
mkdir -p "$work/mod/talos/v1alpha3" "$work/mod/kairos/v1beta2"
cat > "$work/mod/go.mod" <<MOD
module example.invalid/simcrds
go 1.25.7
require (
	kubevirt.io/api $kv
	kubevirt.io/containerized-data-importer-api $cdi
	sigs.k8s.io/cluster-api $capi
)
MOD
cat > "$work/mod/tools.go" <<'GO'
package simcrds

import (
	_ "kubevirt.io/api/core/v1"
	_ "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)
GO
# Talos v1alpha3: the API types only (webhooks and conversions need Talos machinery); Cluster API's
# v1beta1 types moved to api/core/v1beta1 in v1.11.
for f in types.go talosconfig_types.go talosconfigtemplate_types.go groupversion_info.go conditions.go; do
	git -C "$talos" show "release-0.6:api/v1alpha3/$f" |
		sed 's#"sigs.k8s.io/cluster-api/api/v1beta1"#"sigs.k8s.io/cluster-api/api/core/v1beta1"#' >"$work/mod/talos/v1alpha3/$f"
done
# Kairos v1beta2: the API types, plus the kubeadm worker distribution of v0.2.x (see kubeadm.go.in).
for f in kairosconfig_types.go kairosconfigtemplate_types.go groupversion_info.go; do
	git -C "$kairos" show "HEAD:api/bootstrap/v1beta2/$f" |
		sed 's#"sigs.k8s.io/cluster-api/api/v1beta1"#"sigs.k8s.io/cluster-api/api/core/v1beta1"#' >"$work/mod/kairos/v1beta2/$f"
done
sed -i 's#+kubebuilder:validation:Enum=k0s;k3s$#+kubebuilder:validation:Enum=k0s;k3s;kubeadm#' "$work/mod/kairos/v1beta2/kairosconfig_types.go"
sed -i 's#^\tInstall \*InstallConfig `json:"install,omitempty"`#&\n\n\t// Kubeadm configures the kubeadm worker distribution.\n\t// +optional\n\tKubeadm *KubeadmConfig `json:"kubeadm,omitempty"`#' "$work/mod/kairos/v1beta2/kairosconfig_types.go"
grep -q 'Kubeadm \*KubeadmConfig' "$work/mod/kairos/v1beta2/kairosconfig_types.go"
cp "$root/hack/simcrds/kubeadm.go.in" "$work/mod/kairos/v1beta2/kubeadm.go"
(cd "$work/mod" && cp "$root/go.sum" . && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true)

gen() { (cd "$work/mod" && GOFLAGS=-mod=mod "$work/bin/controller-gen" crd:allowDangerousTypes=true,generateEmbeddedObjectMeta=true "paths=$1" "output:crd:dir=$2"); }
gen kubevirt.io/api/core/v1 "$work/out/kubevirt"
gen kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1 "$work/out/cdi"
gen ./talos/v1alpha3 "$work/out/talos"
gen ./kairos/v1beta2 "$work/out/kairos"
capk=$(cd "$work/mod" && go mod download -json "sigs.k8s.io/cluster-api-provider-kubevirt@$CAPK" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
mkdir -p "$work/out/capk" && cp "$capk"/config/crd/bases/*.yaml "$work/out/capk/"

cd "$root" && go run ./hack/simcrds -in "$work/out" -out fixtures/crds \
	-kubevirt "$kv" -cdi "$cdi" -capk "$CAPK" -controller-tools "$CONTROLLER_TOOLS" \
	-talos "$(git -C "$talos" describe --tags release-0.6)" -kairos "main@$(git -C "$kairos" rev-parse --short HEAD)"
