package realupstream

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// PlatformPod is how the platform runs a controller: the namespace, Deployment, pod labels,
// container and image of its Pod on a real management cluster. The sim publishes a Pod of that
// shape for each controller it runs as a process, so what watches the platform's Pods reads
// the sim's the same way.
type PlatformPod struct {
	Namespace, Deployment string
	Labels                map[string]string
	Container, Image      string
	// ServiceAccount is the one the Pod runs as; "" is the namespace's default. It is created
	// when missing: the apiserver's ServiceAccount admission refuses a Pod whose account does
	// not exist (kubernetes v1.35.4 plugin/pkg/admission/serviceaccount/admission.go lines
	// 155-162), and a namespace made a moment ago may not have its default account yet.
	ServiceAccount string
}

// simScheduler is the scheduler the sim's platform Pods name: none runs under that name, so
// kube-scheduler leaves them unbound and kwok, which plays Pods on its Nodes, never sees them;
// the supervisor writes their status as the kubelet of the harness's machine.
const simScheduler = "cozy-e2e-sim-supervisor"

// podStatus writes a supervised controller's Pod status.
type podStatus struct {
	c   *cluster.Cluster
	key client.ObjectKey
	log io.Writer

	// uid and container name the Pod's Events, as the kubelet's container reference does.
	uid       string
	container string

	mu     sync.Mutex
	status corev1.PodStatus
}

// publishPod creates pod's namespace and its Pod, running and ready since ctl started.
func publishPod(ctx context.Context, c *cluster.Cluster, pod PlatformPod, ctl *Controller, log io.Writer) (*podStatus, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("upstream: namespace %s for %s's Pod: %w", pod.Namespace, ctl.Name, err)
	}
	sa := pod.ServiceAccount
	if sa == "" {
		sa = "default"
	}
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: pod.Namespace}}
	if err := c.Client.Create(ctx, account); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("upstream: service account %s/%s for %s's Pod: %w", pod.Namespace, sa, ctl.Name, err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Deployment + "-sim", Namespace: pod.Namespace, Labels: pod.Labels},
		Spec: corev1.PodSpec{
			ServiceAccountName:           sa,
			AutomountServiceAccountToken: new(bool),
			SchedulerName:                simScheduler,
			Containers: []corev1.Container{{Name: pod.Container, Image: pod.Image,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}},
		},
	}
	if err := c.Client.Create(ctx, p); err != nil {
		return nil, fmt.Errorf("upstream: creating %s's Pod %s/%s: %w", ctl.Name, p.Namespace, p.Name, err)
	}
	started := metav1.NewTime(ctl.Started)
	ps := &podStatus{c: c, key: client.ObjectKeyFromObject(p), log: log, uid: string(p.UID), container: pod.Container, status: corev1.PodStatus{
		Phase: corev1.PodRunning, StartTime: &started, HostIP: "127.0.0.1", PodIP: "127.0.0.1",
		ContainerStatuses: []corev1.ContainerStatus{{Name: pod.Container, Image: pod.Image,
			ContainerID: "sim://" + strconv.Itoa(ctl.Pid()),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
	}}
	ps.setReady(true, ctl.Started.Add(ctl.Ready))
	return ps, ps.write(ctx)
}

// exited records a termination; a wait above zero is CrashLoopBackOff, with the kubelet's
// message (kubernetes v1.35.4 pkg/kubelet/kuberuntime/kuberuntime_manager.go line 1847; the
// reason is kubecontainer.ErrCrashLoopBackOff, pkg/kubelet/container/sync_result.go line 77).
func (ps *podStatus) exited(ctx context.Context, t termination, wait time.Duration) {
	ps.mu.Lock()
	cs := &ps.status.ContainerStatuses[0]
	reason := "Error"
	if t.exitCode == 0 {
		reason = "Completed"
	}
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: t.exitCode, Signal: t.signal, Reason: reason, Message: t.message,
		StartedAt: metav1.NewTime(t.started), FinishedAt: metav1.NewTime(t.finished), ContainerID: cs.ContainerID,
	}}
	cs.State = corev1.ContainerState{Terminated: cs.LastTerminationState.Terminated.DeepCopy()}
	if wait > 0 {
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s", wait.Round(time.Second), cs.Name, ps.key.Name, ps.key.Namespace)}}
	}
	ps.mu.Unlock()
	ps.setReady(false, t.finished)
	ps.report(ctx)
	if wait > 0 {
		ps.event(ctx, corev1.EventTypeWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s_%s(%s)", ps.container, ps.key.Name, ps.key.Namespace, ps.uid))
	}
}

// started records a restart: the container runs again, not ready yet.
func (ps *podStatus) started(ctx context.Context, at time.Time) {
	ps.mu.Lock()
	cs := &ps.status.ContainerStatuses[0]
	cs.RestartCount++
	cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}
	ps.mu.Unlock()
	ps.report(ctx)
	ps.event(ctx, corev1.EventTypeNormal, "Started", "Container started")
}

// ready records that the restarted controller answers its readiness check again.
func (ps *podStatus) ready(ctx context.Context) {
	ps.setReady(true, time.Now())
	ps.report(ctx)
}

// setReady sets the container's readiness and the Pod's Ready and ContainersReady conditions.
func (ps *podStatus) setReady(ready bool, at time.Time) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	cs := &ps.status.ContainerStatuses[0]
	cs.Ready = ready
	started := cs.State.Running != nil
	cs.Started = &started
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		found := false
		for i := range ps.status.Conditions {
			if c := &ps.status.Conditions[i]; c.Type == t {
				found = true
				if c.Status != st {
					c.Status, c.LastTransitionTime = st, metav1.NewTime(at)
				}
			}
		}
		if !found {
			ps.status.Conditions = append(ps.status.Conditions, corev1.PodCondition{Type: t, Status: st, LastTransitionTime: metav1.NewTime(at)})
		}
	}
}

// report writes the status; when it cannot, the Pod shows the previous state until the next
// change, and the log says so.
func (ps *podStatus) report(ctx context.Context) {
	if err := ps.write(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintf(ps.log, "sim: %v (the Pod shows its previous state until the next change)\n", err)
	}
}

// event records what the kubelet records for the container: a Warning BackOff while it waits
// to restart it, a Normal Started when it started it (kubernetes v1.35.4
// pkg/kubelet/kuberuntime/kuberuntime_manager.go lines 1841-1844, kuberuntime_container.go line
// 298; the reasons pkg/kubelet/events/event.go lines 22, 27; format.Pod's name_namespace(uid),
// pkg/kubelet/util/format/pod.go lines 37-40), on the container's reference
// (spec.containers{name}, pkg/kubelet/container/ref.go) from the component kubelet
// (cmd/kubelet/app/server.go line 572). An Event that cannot be written is said in the log.
func (ps *podStatus) event(ctx context.Context, kind, reason, message string) {
	now := metav1.NewTime(time.Now())
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ps.key.Name + ".", Namespace: ps.key.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ps.key.Namespace, Name: ps.key.Name,
			UID: types.UID(ps.uid), FieldPath: "spec.containers{" + ps.container + "}"},
		Type: kind, Reason: reason, Message: message, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "kubelet", Host: "127.0.0.1"},
	}
	if err := ps.c.Client.Create(ctx, e); err != nil && ctx.Err() == nil {
		fmt.Fprintf(ps.log, "sim: the %s Event of Pod %s was not written: %v\n", reason, ps.key, err)
	}
}

func (ps *podStatus) write(ctx context.Context) error {
	p := &corev1.Pod{}
	if err := ps.c.Client.Get(ctx, ps.key, p); err != nil {
		return fmt.Errorf("upstream: reading Pod %s: %w", ps.key, err)
	}
	ps.mu.Lock()
	p.Status = *ps.status.DeepCopy()
	ps.mu.Unlock()
	if err := ps.c.Client.Status().Update(ctx, p); err != nil {
		return fmt.Errorf("upstream: writing the status of Pod %s: %w", ps.key, err)
	}
	return nil
}
