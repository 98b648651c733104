package diag

import (
	"sort"

	"github.com/cozystack/cozy-e2e/framework/platformwatch"
)

// platformNamespaces are the management cluster's namespaces of the platform components the
// join depends on (platformwatch.Components).
func platformNamespaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range platformwatch.Components() {
		if !seen[c.Namespace] {
			seen[c.Namespace] = true
			out = append(out, c.Namespace)
		}
	}
	sort.Strings(out)
	return out
}

// platformCollectors read, for a failure of class platform, what the platform's namespaces
// say: their Events (the kubelet's BackOff and Started on a crash-looping component) and every
// Pod not running and ready, with its logs (the bring-up collectors, pointed at those
// namespaces). Each runs once however many pools fail on the same outage.
func (s *scene) platformCollectors() []collector {
	nss := platformNamespaces()
	events, pods := bringUpEvents(s.mgmt, nss), bringUpPods(s.mgmt, nss)
	events.name, events.key = "platform-events", "platform-events"
	pods.name, pods.key = "platform-pods", "platform-pods"
	return []collector{pods, events}
}
