// Package cdi stands in for the Containerized Data Importer (CDI v1.64, cdi.kubevirt.io/v1beta1):
// a DataVolume gets its PVC (the sim provisions and pre-binds a PersistentVolume; the real
// kube-controller-manager binds them), then the importer Pod importer-<dv> (container importer,
// run by kwok), whose progress shows in status.progress ("42.00%") and whose log is an importer's
// log, with the phases, conditions (Bound, Running, Ready), restartCount and events CDI reports.
// The disk comes from the DataVolume's source: the Talos image factory (http) or a registry.
//
// Faults: disk-import-refused makes the registry answer 401: the importer exits with CDI's
// termination message, restarts (CrashLoopBackOff) and the DataVolume's Running condition turns
// False with reason Error and that message while its restartCount climbs (CDI v1.64 keeps the
// phase ImportInProgress and retries). disk-import-stall stops the import at a few percent.
package cdi

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
)

// Names CDI uses.
const (
	AnnEndpoint         = "cdi.kubevirt.io/storage.import.endpoint"
	AnnSource           = "cdi.kubevirt.io/storage.import.source"
	AnnContentType      = "cdi.kubevirt.io/storage.contentType"
	AnnImportPod        = "cdi.kubevirt.io/storage.import.importPodName"
	AnnPodPhase         = "cdi.kubevirt.io/storage.pod.phase"
	AnnPodRestarts      = "cdi.kubevirt.io/storage.pod.restarts"
	AnnRunningCondition = "cdi.kubevirt.io/storage.condition.running"
	AnnCreatedForDV     = "cdi.kubevirt.io/createdForDataVolume"
	AnnProvisionedBy    = "pv.kubernetes.io/provisioned-by"
	ImporterContainer   = "importer"
	ImporterImage       = "quay.io/kubevirt/cdi-importer:v1.64.0"
	// Provisioner provisions the sim's volumes when the StorageClass is not installed.
	Provisioner = "csi.sim.cozy-e2e.io"
)

// LatencyImport is the latency name of one whole disk import.
const LatencyImport = "disk-import"

// Setup registers the DataVolume reconciler and the volume deleter on mgr.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	if err := setupDataVolume(mgr, env); err != nil {
		return err
	}
	return setupVolumeDeleter(mgr)
}
