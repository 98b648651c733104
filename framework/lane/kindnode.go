package lane

import (
	"fmt"
	"regexp"
	"strconv"
)

// The management Kubernetes minors Cluster API v1.13 supports, the range a kind node image must
// fall in: "Kubernetes v1.32" to "Kubernetes v1.36" in the v1.13 column of the core provider's
// support matrix, v1.36 from v1.13.1 (kubernetes-sigs/cluster-api v1.13.5
// docs/book/src/reference/versions.md:364-374; v1.30 and v1.31 are "only workload").
const (
	ManagementMinMinor = 32
	ManagementMaxMinor = 36
)

// ManagementRange names the range and where it is read, for messages and the plan.
const ManagementRange = "Cluster API v1.13 supports v1.32 to v1.36 for a management cluster (docs/book/src/reference/versions.md at v1.13.5)"

// kindNodeTag is how kind tags its node images: the Kubernetes release they run.
var kindNodeTag = regexp.MustCompile(`^v1\.(\d+)\.(\d+)$`)

// CheckKindNodeVersion holds a kind node image's tag to a Kubernetes release (kind tags its node
// images so, and the node configuration reads the kubelet's version from it) inside the
// management range of Cluster API v1.13.
func CheckKindNodeVersion(tag string) error {
	m := kindNodeTag.FindStringSubmatch(tag)
	if m == nil {
		return fmt.Errorf("tag %q is not a Kubernetes release vX.Y.Z (kind tags its node images with the release they run)", tag)
	}
	minor, _ := strconv.Atoi(m[1])
	if minor < ManagementMinMinor || minor > ManagementMaxMinor {
		return fmt.Errorf("it runs Kubernetes %s, outside the management range: %s", tag, ManagementRange)
	}
	return nil
}
