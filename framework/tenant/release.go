package tenant

// Reasons of a HelmRelease's Ready=False condition that fluxcd/helm-controller gives while it
// still works on a release, so that they are no refusal: a wait reads on. Read at v1.5.0, the
// one Cozystack's Flux runs (cozystack/cozystack internal/fluxinstall/manifests/fluxcd.yaml:8097),
// and v1.6.2, the one the sim runs; lines are v1.5.0's internal/controller/helmrelease_controller.go.
// Every other reason of Ready=False (InstallFailed, UpgradeFailed with the chart's own words) is
// the platform's answer.
const (
	// ReasonProgressing goes with Ready=Unknown while a release is reconciled (:269, :293;
	// github.com/fluxcd/pkg/apis/meta conditions.go ProgressingReason).
	ReasonProgressing = "Progressing"
	// ReasonProgressingWithRetry and ReasonReconciling belong to the Reconciling condition
	// (internal/reconcile/atomic_release.go; meta ProgressingWithRetryReason,
	// ReconcilingCondition), kept for a platform that copies them onto Ready.
	ReasonProgressingWithRetry = "ProgressingWithRetry"
	ReasonReconciling          = "Reconciling"
	// ReasonDependencyNotReady: a dependsOn release is not Ready yet (:256).
	ReasonDependencyNotReady = "DependencyNotReady"
	// ReasonSourceNotReady: the chart source is not ready yet, requeued (:299).
	ReasonSourceNotReady = "SourceNotReady"
	// ReasonArtifactFailed: the source object or its artifact cannot be had yet, requeued (:288,
	// :331; also a chart that does not load, :336, which is no answer to the app's spec either).
	ReasonArtifactFailed = "ArtifactFailed"
	// ReasonHealthCheckCanceled: a new reconcile was queued during the health checks (:426).
	ReasonHealthCheckCanceled = "HealthCheckCanceled"
)

// failureReason: whether Ready=False with reason is the release failing, as opposed to one
// helm-controller still works on. An empty reason is no answer either.
func failureReason(reason string) bool {
	switch reason {
	case ReasonProgressing, ReasonProgressingWithRetry, ReasonReconciling, ReasonDependencyNotReady,
		ReasonSourceNotReady, ReasonArtifactFailed, ReasonHealthCheckCanceled, "":
		return false
	}
	return true
}
