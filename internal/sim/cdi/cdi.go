// Package cdi stands in for what CDI v1.64.0 (kubevirt.io/containerized-data-importer) needs a
// node or an image for; the real cdi-controller runs beside it (internal/sim/realupstream) and owns
// every DataVolume, claim and importer Pod. Two pieces remain:
//
//   - the importer's work: when kwok runs an importer Pod cdi-controller created, the stand-in
//     plays its container through the Pod alone (its log, its exit and termination message, the
//     kubelet's restarts), never touching a DataVolume or a claim;
//   - a provisioner for the rancher.io/local-path classes the harness creates: the volume of a
//     claim whose consumer kube-scheduler placed, bound to that node, as local-path-provisioner
//     makes it.
//
// Faults: disk-import-refused makes the importer's source answer 401: the importer exits 1 with
// "Unable to process data: ..." and the kubelet restarts it after a back-off (CDI copies the
// terminated state's message to the DataVolume's Running condition and retries without end).
// disk-import-stall stops the import at a few percent: the importer runs on, logging no progress.
package cdi

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// ImporterContainer is the importer Pod's one container, and its cdi.kubevirt.io label value
// (containerized-data-importer v1.64.0 pkg/common/common.go ImporterPodName).
const ImporterContainer = "importer"

// LatencyImport is the latency name of one whole disk import.
const LatencyImport = "disk-import"

// Setup registers the importer's work and the provisioner on mgr.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	if err := setupImporter(mgr, env); err != nil {
		return err
	}
	return setupProvisioner(mgr, env.RealNodeVolumes)
}
