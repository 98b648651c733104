package join

import (
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
)

// Every failed attempt the console shows is counted, the latest quoted, and a new launcher's
// console keeps them (the guest is the same).
func TestTheConsoleKeepsTheLatestFailedJoin(t *testing.T) {
	st := &consoleState{}
	kairos := mustFamily(osfamily.Kairos)
	first, second := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC), time.Date(2026, 12, 5, 6, 0, 20, 0, time.UTC)
	st.match(kairos, first, "error execution phase preflight: couldn't validate the identity of the API Server: connection refused")
	st.match(kairos, first.Add(time.Second), "failed to apply kubeadm join, will retry in 10s")
	st.match(kairos, second, "error execution phase kubelet-start: timed out waiting for the condition")
	if st.Refusals != 2 || !strings.HasPrefix(st.Refused, "error execution phase kubelet-start") || !st.RefusedAt.Equal(second) {
		t.Errorf("refusals %d, last %q at %s; want 2, the kubelet-start one at %s", st.Refusals, st.Refused, st.RefusedAt, second)
	}
}
