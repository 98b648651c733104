package testbed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

func object(kind, name string, deleting time.Time, finalizers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind(kind)
	u.SetNamespace("tenant-e2eab")
	u.SetName(name)
	u.SetFinalizers(finalizers)
	if !deleting.IsZero() {
		t := metav1.NewTime(deleting)
		u.SetDeletionTimestamp(&t)
	}
	return u
}

// An object is held when it is being deleted and only finalizers no controller of the platform
// removes are left: a platform finalizer still there means its controller has work left.
func TestHeldIsWhatOnlyForeignFinalizersKeep(t *testing.T) {
	now := time.Now()
	cases := []struct {
		obj  *unstructured.Unstructured
		held bool
	}{
		{object("Secret", "a", time.Time{}, "sim.cozy-e2e.io/held"), false},
		{object("Secret", "a", now, "sim.cozy-e2e.io/held"), true},
		{object("VirtualMachine", "vm", now, "kubevirt.io/virtualMachineControllerFinalize", "sim.cozy-e2e.io/held"), false},
		{object("VirtualMachine", "vm", now), false},
		{object("PersistentVolumeClaim", "pvc", now, "kubernetes.io/pvc-protection"), false},
	}
	for i, c := range cases {
		if got := Held(c.obj); got != c.held {
			t.Errorf("case %d (%s %v): held %v, want %v", i, c.obj.GetKind(), c.obj.GetFinalizers(), got, c.held)
		}
	}
}

// A leftover names its kind, namespace, name, how long it has been deleting and each finalizer
// with who removes it; a namespace also says why it is still there.
func TestALeftoverNamesItsFinalizersAndWhoRemovesThem(t *testing.T) {
	now := time.Now().Truncate(time.Second) // a deletionTimestamp holds whole seconds
	got := Leftover(object("VirtualMachine", "vm", now.Add(-12*time.Second), "kubevirt.io/virtualMachineControllerFinalize", "backup.example/hold"), now)
	want := "VirtualMachine tenant-e2eab/vm (deleting for 12s; finalizers: kubevirt.io/virtualMachineControllerFinalize [KubeVirt's VM controller, once the VMI is gone], backup.example/hold [no controller of the platform removes it])"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	ns := object("Namespace", "tenant-e2eab", now.Add(-time.Second))
	ns.SetNamespace("")
	_ = unstructured.SetNestedField(ns.Object, "Terminating", "status", "phase")
	_ = unstructured.SetNestedSlice(ns.Object, []any{map[string]any{"type": "NamespaceFinalizersRemaining", "status": "True",
		"message": "Some content in the namespace has finalizers remaining: sim.cozy-e2e.io/held in 1 resource instances"}}, "status", "conditions")
	if got := Leftover(ns, now); !strings.Contains(got, "Namespace tenant-e2eab (deleting for 1s; Terminating; NamespaceFinalizersRemaining: Some content") {
		t.Errorf("namespace: %s", got)
	}
}

// Gone is done when nothing is left, waits while the platform still works on what is, and is
// terminal (class leak) as soon as something is held, naming everything left.
func TestGoneJudgesLeftoversAndHolds(t *testing.T) {
	now := time.Now()
	ref := tenant.Ref{GVK: SecretGVK, Namespace: "tenant-e2eab"}
	judge := Gone([]tenant.Ref{ref}, func(o *unstructured.Unstructured) bool { return strings.HasPrefix(o.GetName(), "kubernetes-") })
	done, detail, err := judge(tenant.Objects{ref: {object("Secret", "sim-canary", time.Time{})}})
	if !done || err != nil {
		t.Fatalf("an object not of the app counted: %v %s %v", done, detail, err)
	}
	done, detail, err = judge(tenant.Objects{ref: {object("Secret", "kubernetes-a-kubeconfig", now)}})
	if done || err != nil || !strings.HasPrefix(detail, "left: Secret tenant-e2eab/kubernetes-a-kubeconfig (deleting for ") || !strings.HasSuffix(detail, "; no finalizers)") {
		t.Fatalf("a deleting object: %v %q %v", done, detail, err)
	}
	_, _, err = judge(tenant.Objects{ref: {object("Secret", "kubernetes-a-kubeconfig", now, "sim.cozy-e2e.io/held")}})
	var term *tenant.Terminal
	if !errors.As(err, &term) || term.Class != verdict.Leak || !strings.Contains(term.Detail, "sim.cozy-e2e.io/held [no controller of the platform removes it]") {
		t.Fatalf("a held object: %v", err)
	}
}

// A step that ran out of its phase's time is a deadline at the phase unless it carries a class.
func TestInPhaseMakesUntypedDeadlinesOfThePhase(t *testing.T) {
	err := InPhase("remediation", "remed", fmt.Errorf("patching: %w", context.DeadlineExceeded))
	var de *DeadlineError
	if !errors.As(err, &de) || de.Phase != "remediation" || de.Pool != "remed" {
		t.Fatalf("%T %v", err, err)
	}
	se := &join.StageError{Pool: "remed", Stage: "replaced", Class: verdict.Remediation}
	if got := InPhase("remediation", "remed", fmt.Errorf("%w: %w", se, context.DeadlineExceeded)); !errors.As(got, &se) || errors.As(got, &de) {
		t.Fatalf("a typed error was rewrapped: %v", got)
	}
	if InPhase("x", "", nil) != nil {
		t.Fatal("nil became an error")
	}
}

// A worker is every object it is made of: a removed one must leave none of them.
func TestAWorkerNamesEveryObjectItIsMadeOf(t *testing.T) {
	w := Worker{Machine: "m", VM: "vm", Node: "vm", Bootstrap: "m"}
	var got []string
	for _, r := range w.Refs("ns", nil) {
		got = append(got, r.GVK.Kind+"/"+r.Name)
	}
	want := "Machine/m KubevirtMachine/vm VirtualMachine/vm VirtualMachineInstance/vm DataVolume/vm-disk-system PersistentVolumeClaim/vm-disk-system Secret/m Secret/m-userdata"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}

// The plan shows the phases every conformance cluster runs at once by the names the testbed
// runs them under.
func TestTheClustersPhasesAreTheFixtures(t *testing.T) {
	if strings.Join(lane.ClusterPhases, ",") != PhaseTenant+","+PhasePools {
		t.Fatalf("lane.ClusterPhases %v, the testbed's phases %s and %s", lane.ClusterPhases, PhaseTenant, PhasePools)
	}
}
