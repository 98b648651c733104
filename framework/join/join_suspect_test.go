package join_test

import (
	"errors"
	"strings"
	"time"

	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
)

// A state upstream retries or repairs is a suspect: the join shows it within a moment of its
// appearing, forgets it when upstream clears it, never fails on it, and names the suspects still
// there when the deadline ends the pool. Here: a Kairos bootstrap provider's failureReason that
// its next reconcile clears, a KubevirtMachine's failureReason CAPK latched, and a Kairos Node
// that registered without the providerID its provider patches on later, which never comes.
func testSuspects(t *testing.T, w *world.World) {
	s := newScene(t, w, osfamily.Kairos, 1)
	s.template()
	vm := s.machine("sssss")
	r := s.start(25 * time.Second)
	s.at(r, join.StageBootstrapData)
	suspected := func(class verdict.Class) func() bool {
		return func() bool {
			p, _ := r.w.Progress(s.pool.Names.Pool)
			for _, x := range p.Suspects {
				if x.Class == class {
					return true
				}
			}
			return false
		}
	}
	seen := time.Now()
	s.failStatus(nil, "KairosConfig", vm, "BootstrapDataSecretGenerationFailed", `get user password secret tenant-x/pw: secrets "pw" not found`)
	s.poll("a bootstrap suspect", suspected(verdict.Bootstrap), r.log, progressOf{r.w, s.pool.Names.Pool})
	if d := time.Since(seen); d > 2*time.Second {
		t.Errorf("the suspect was shown %s after it appeared", d)
	}
	s.clearStatus("KairosConfig", vm)
	s.poll("the bootstrap suspect cleared", func() bool { return !suspected(verdict.Bootstrap)() }, r.log)
	s.importing(vm, "50.0%")
	s.dataVolume(vm, cdiv1.Succeeded, "100.0%")
	ip := s.ip()
	s.vmi(vm, kubevirtv1.Scheduling, ip)
	pod := s.launcher(vm, "1Gi")
	s.vmi(vm, kubevirtv1.Running, ip)
	s.kubeletConfig(withClusterDNS)
	s.console(pod, "[    0.000000] Linux version 6.12.0 (kairos)", "This node has joined the cluster:")
	s.failStatus(nil, "KubevirtMachine", vm, "UpdateError", "The Machine's VM pod is marked for eviction due to infra node drain.")
	s.node("metal-sss1", ip)
	s.poll("an identity suspect", suspected(verdict.Identity), r.log, progressOf{r.w, s.pool.Names.Pool})
	select {
	case <-r.done:
		t.Fatalf("a suspect ended the join: %v\n%s", r.err, r.log)
	default:
	}
	r.wait(t)
	var se *join.StageError
	if !errors.As(r.err, &se) || se.Class != verdict.Deadline {
		t.Fatalf("want a deadline: %v\n%s", r.err, r.log)
	}
	msg := se.Error()
	if se.Stage != join.StageProviderID || !strings.Contains(msg, "Node metal-sss1 has no providerID yet") {
		t.Errorf("the deadline does not say the Node still lacks its providerID: %s", msg)
	}
	classes := map[verdict.Class]bool{}
	for _, x := range se.Suspects {
		classes[x.Class] = true
	}
	if !classes[verdict.Identity] || !classes[verdict.MachineFailed] || classes[verdict.Bootstrap] {
		t.Errorf("suspects at the deadline %+v: want the identity and the KubevirtMachine's, not the cleared bootstrap one", se.Suspects)
	}
	if !strings.Contains(msg, "suspect identity at provider-id") {
		t.Errorf("the failure does not name its suspect: %s", msg)
	}
	log := r.log.String()
	for _, want := range []string{"suspect bootstrap (KairosConfig/" + vm + "):", "suspect bootstrap cleared (KairosConfig/" + vm + ")",
		"suspect identity (Node/metal-sss1):", "suspect machine-failed (KubevirtMachine/" + vm + "):"} {
		if !strings.Contains(log, want) {
			t.Errorf("the join's log lacks %q:\n%s", want, log)
		}
	}
}
