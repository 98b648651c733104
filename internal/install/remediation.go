package install

import (
	"fmt"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/internal/fluxrelease"
)

// remediationNote is the one line the run's summary shows for install-time remediations.
func remediationNote(rem []fluxrelease.Remediation) string {
	total := 0
	parts := make([]string, len(rem))
	for i, r := range rem {
		total += r.Count()
		parts[i] = fmt.Sprintf("%s/%s %d", r.Namespace, r.Name, r.Count())
		if !r.Last.IsZero() {
			parts[i] += " (last " + r.Last.UTC().Format(time.RFC3339) + ")"
		}
	}
	return fmt.Sprintf("install-time remediations: %d in %d HelmReleases: %s", total, len(rem), strings.Join(parts, "; "))
}
