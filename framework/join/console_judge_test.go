package join

import (
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// How the join reads a guest's console, and what it leaves to the tenant's own signals.

// The console lines of a refused kubeadm join; lines of a healthy boot that must not be taken
// for one; and a Talos guest, whose console says nothing of its join.
func TestJoinRefusalLines(t *testing.T) {
	kairos, talos := mustFamily(osfamily.Kairos), mustFamily(osfamily.Talos)
	for _, l := range []string{
		`error execution phase preflight: couldn't validate the identity of the API Server: could not find a JWS signature`,
		`error execution phase kubelet-start: a Node with name "x" and status "Ready" already exists`,
	} {
		if !kairos.ConsoleRefused.MatchString(l) {
			t.Errorf("not taken for a refusal: %s", l)
		}
	}
	for _, l := range []string{
		`[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap`,
		`This node has joined the cluster:`,
	} {
		if kairos.ConsoleRefused.MatchString(l) {
			t.Errorf("taken for a refusal: %s", l)
		}
	}
	if talos.ConsoleJoined != nil {
		t.Error("Talos prints no kubelet output on its serial console; no line of it says the worker joined")
	}
	// machined's line for a kubelet that exited, with its last output, as a Talos console shows it.
	exited := `[talos] service[kubelet](Waiting): Error running Containerd(kubelet), going to restart forever: task "kubelet" failed: exit code 1 (last log "...\"No valid client certificate is found and the server is responsive, exiting.\"")`
	if !talos.ConsoleRefused.MatchString(exited) {
		t.Errorf("not taken for a failed attempt: %s", exited)
	}
	for _, l := range []string{
		`[talos] service[kubelet](Running): Health check failed: Get "http://127.0.0.1:10248/healthz": dial tcp 127.0.0.1:10248: connect: connection refused`,
		`[talos] service[kubelet](Running): Started task kubelet (PID 229) for container kubelet`,
		`[talos] service[cri](Waiting): Error running Containerd(cri), going to restart forever: task "cri" failed: exit code 1`,
	} {
		if talos.ConsoleRefused.MatchString(l) {
			t.Errorf("taken for a failed join attempt: %s", l)
		}
	}
}

// A Talos kubelet that exited shows as a join-rejected suspect quoting machined's line, the
// kubelet's own last words in it; it clears once the tenant approves the kubelet's CSR.
func TestATalosKubeletThatExitedIsASuspect(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	v := joined(p, "m1")
	v.Node, v.Workload, v.CSRs = nil, nil, nil
	v.Console.Joined = false
	v.Console.Refused = `[talos] service[kubelet](Waiting): Error running Containerd(kubelet), going to restart forever: task "kubelet" failed: exit code 1 (last log "Unauthorized")`
	v.Console.Refusals = 2
	out := evaluate(withTemplate(p, v))
	if out.Terminal != nil || len(out.Suspects) != 1 || out.Suspects[0].Class != verdict.JoinRejected ||
		!strings.Contains(out.Suspects[0].Detail, `2 failed join attempt(s), the last: [talos] service[kubelet](Waiting)`) ||
		!strings.Contains(out.Suspects[0].Detail, "Unauthorized") || !strings.Contains(out.Suspects[0].Detail, "5 s later, forever") {
		t.Fatalf("%+v", out)
	}
	v.CSRs = []certificatesv1.CertificateSigningRequest{{ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Username: "system:node:m1"},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
			{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}}}}
	if out := evaluate(withTemplate(p, v)); len(out.Suspects) != 0 {
		t.Errorf("with the kubelet's CSR approved the attempt still stands: %+v", out.Suspects)
	}
}

// A kubeadm-joined (Kairos) worker's join is judged from its console: waiting for kubeadm's
// last words, then for its Node, found by its providerID.
func TestAKairosJoinIsReadFromItsConsole(t *testing.T) {
	p := testPool(osfamily.Kairos, 1)
	v := joined(p, "m1")
	v.Node, v.Workload = nil, nil
	v.Console.Joined = false
	if out := evaluate(withTemplate(p, v)); out.Stage != StageJoin || !strings.Contains(out.Detail, "waiting for the join") {
		t.Fatalf("before kubeadm's last words: %+v", out)
	}
	v.Console.Joined = true
	if out := evaluate(withTemplate(p, v)); out.Stage != StageNodeRegistered || !strings.Contains(out.Detail, "a Node with providerID kubevirt://m1") {
		t.Fatalf("after them: %+v", out)
	}
}

// A Talos worker whose Node never comes waits at join, naming its CSR (or that there is none),
// never judged refused from its console.
func TestATalosJoinIsJudgedFromTheTenantNotTheConsole(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	v := joined(p, "m1")
	v.Node, v.Workload = nil, nil
	v.Console.Joined, v.Console.Refused = false, ""
	v.Console.Last = `[talos] service[kubelet](Running): Health check successful`
	out := evaluate(withTemplate(p, v))
	if out.Terminal != nil || out.Stage != StageJoin || !strings.Contains(out.Detail, "talos prints no join on its console") ||
		!strings.Contains(out.Detail, "no kubelet CSR in the tenant") {
		t.Fatalf("%+v", out)
	}
}

// A console that stays silent holds the pool at guest-boot; one another client took before the
// guest printed anything does not (the boot cannot be seen, so the tenant decides), and says
// so; a kubelet CSR of the VMI shows the boot whatever the console said.
func TestATakenConsoleLeavesTheBootToTheTenant(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	v := joined(p, "m1")
	v.Node, v.Workload = nil, nil
	v.Console = &consoleState{Pod: "virt-launcher-m1-abcde", Source: "console subresource"}
	if out := evaluate(withTemplate(p, v)); out.Stage != StageGuestBoot || !strings.Contains(out.Detail, "its serial console is silent") {
		t.Fatalf("silent console: %+v", out)
	}
	v.Console.Lost, v.Console.LostAt = "another client took it", time.Date(2026, 12, 3, 7, 1, 2, 0, time.UTC)
	out := evaluate(withTemplate(p, v))
	if out.Stage != StageJoin || !strings.Contains(out.Detail, "its console was taken at 07:01:02 before the guest printed anything; the boot is not seen") {
		t.Fatalf("taken console: %+v", out)
	}
	v.Console = &consoleState{Pod: "virt-launcher-m1-abcde"}
	v.CSRs = []certificatesv1.CertificateSigningRequest{{ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Username: "system:node:m1", SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName}}}
	if out := evaluate(withTemplate(p, v)); out.Stage != StageJoin {
		t.Fatalf("a silent console with a kubelet CSR: %+v", out)
	}
}
