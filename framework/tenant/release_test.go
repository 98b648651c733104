package tenant

import "testing"

// The reasons helm-controller gives Ready=False while it still works on a release are no
// refusal; the reasons of a failed install or upgrade are.
func TestOnlyAFailedReleaseIsARefusal(t *testing.T) {
	for reason, refusal := range map[string]bool{
		ReasonProgressing: false, ReasonDependencyNotReady: false, ReasonSourceNotReady: false,
		ReasonArtifactFailed: false, ReasonHealthCheckCanceled: false, "": false,
		"InstallFailed": true, "UpgradeFailed": true, "RollbackFailed": true,
	} {
		if got := failureReason(reason); got != refusal {
			t.Errorf("Ready=False reason %q: refusal %v, want %v", reason, got, refusal)
		}
	}
}
