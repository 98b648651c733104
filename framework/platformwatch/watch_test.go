package platformwatch

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The platform's own objects, as the kind lane's cluster holds them: virt-controller's
// Deployment and its Pod (labels as virt-operator sets them), restarted once, then crash-looping,
// then recovered; a component without objects (Kamaji here) is not judged.
func TestWatchNamesARestartAndAnOutageFromThePlatformsObjects(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "platformwatch"})
	kube, err := kubernetes.NewForConfig(api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cozy-kubevirt"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The platform's Deployment runs its Pods under an account of its own; here the namespace's
	// default, which no controller makes on a bare apiserver.
	if _, err := kube.CoreV1().ServiceAccounts("cozy-kubevirt").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	lbl := map[string]string{"kubevirt.io": "virt-controller"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "virt-controller", Namespace: "cozy-kubevirt"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "virt-controller", Image: "quay.io/kubevirt/virt-controller:v1.8.4"}}}}}}
	if _, err := kube.AppsV1().Deployments("cozy-kubevirt").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-controller-7d9f-abcde", Namespace: "cozy-kubevirt", Labels: lbl},
		Spec: d.Spec.Template.Spec}
	if pod, err = kube.CoreV1().Pods("cozy-kubevirt").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setStatus := func(restarts int32, ready bool, state corev1.ContainerState, last *corev1.ContainerStateTerminated, at time.Time) {
		t.Helper()
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(at)}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "virt-controller", Image: pod.Spec.Containers[0].Image, Ready: ready,
				RestartCount: restarts, State: state, LastTerminationState: corev1.ContainerState{Terminated: last}}}}
		var err error
		if pod, err = kube.CoreV1().Pods("cozy-kubevirt").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	setStatus(0, true, running, nil, time.Now())
	var log testkit.Buffer
	w := New(Options{Kube: kube, Log: &log})
	outages := w.Outages // handed over before the watch starts, as the testbed's joins are
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// The informers' first listing may come from the apiserver's watch cache, a moment behind
	// the Pod's Ready status: wait for the healthy state rather than assume it.
	testkit.Eventually(ctx, t, "a healthy platform without outages", testkit.Left(ctx), testkit.Holds(func() bool { return len(outages(ctx)) == 0 }))
	// Killed once, restarted, ready again: an event, no outage.
	setStatus(1, true, running, &corev1.ContainerStateTerminated{ExitCode: 137, Signal: 9, Reason: "Error", Message: "leader election lost"}, time.Now())
	testkit.Eventually(ctx, t, "the restart seen", testkit.Left(ctx), testkit.Holds(func() bool { return strings.Contains(log.String(), "virt-controller restarted") }))
	// Crash-looping: the outage names it, since when, why, its last exit and last log line.
	downAt := time.Date(2026, 12, 5, 10, 41, 7, 0, time.UTC)
	setStatus(3, false, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		&corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "starting\nunknown flag: --bogus\n"}, downAt)
	want := "virt-controller unavailable since 10:41:07, CrashLoopBackOff (Pod cozy-kubevirt/virt-controller-7d9f-abcde, 3 restart(s)), last exit 2 Error: unknown flag: --bogus"
	var out []string
	testkit.Eventually(ctx, t, "the outage named", testkit.Left(ctx), testkit.Holds(func() bool {
		out = outages(ctx)
		return len(out) == 1 && out[0] == want
	}))
	if !strings.Contains(log.String(), "platform: virt-controller unavailable: "+want) {
		t.Fatalf("the outage was not logged as it was seen; log:\n%s", log.String())
	}
	// Recovered: the run can say so.
	setStatus(4, true, running, &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}, time.Now())
	testkit.Eventually(ctx, t, "the recovery seen", testkit.Left(ctx), testkit.Holds(func() bool {
		l := log.String()
		return len(outages(ctx)) == 0 && strings.Contains(l[strings.Index(l, want):], "virt-controller available again")
	}))
	if s := w.Summary(); s != "virt-controller restarted 4 time(s), available again" {
		t.Fatalf("summary %q; log:\n%s", s, log.String())
	}
}

// A watch handed over before it starts, that never starts (no management cluster, or its
// listing ran out): Start names what is missing, and the watch names no outage, says nothing,
// and stops. (That it names none before Start holds with or without its started guard, whose
// work is to keep Outages off the indexers while a Start still writes them: no test here
// reaches that moment.)
func TestAWatchNotStartedNamesNothing(t *testing.T) {
	var log testkit.Buffer
	w := New(Options{Log: &log})
	if err := w.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "Options.Kube") {
		t.Errorf("Start without a client: %v, want the missing Options.Kube named", err)
	}
	if got := w.Outages(context.Background()); got != nil {
		t.Errorf("Outages of a watch not started = %q, want none", got)
	}
	if got := w.Summary(); got != "" {
		t.Errorf("Summary of a watch not started = %q, want empty", got)
	}
	w.Stop()
	w.Stop()
	if log.String() != "" {
		t.Errorf("a watch not started wrote %q", log.String())
	}
}
