package platformwatch

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// state is one component as its objects show it now.
type state struct {
	name string
	// present: a Deployment or a Pod of it exists; available: one of its Pods is Ready (or,
	// with Container set, that container is).
	present, available bool
	readyPods          string
	restarts           []restart
	// The not-ready Pod that tells most: when it stopped being ready, why, its last exit.
	since     time.Time
	reason    string
	restarted int32
	exit      *corev1.ContainerStateTerminated
	pod       *corev1.Pod
	container string
	// noPod is the Deployment's word when it has no Pod at all.
	noPod string
}

type restart struct {
	key    string
	count  int32
	detail string
}

// state reads component c from the informers' caches.
func (w *Watch) state(c Component) state {
	pods, d := w.objects(c)
	st := state{name: c.Name, present: len(pods) > 0 || d != nil}
	var ready []string
	for _, p := range pods {
		ok := false
		for _, cs := range p.Status.ContainerStatuses {
			if c.Container != "" && cs.Name != c.Container {
				continue
			}
			st.restarts = append(st.restarts, restart{key: string(p.UID) + "/" + cs.Name, count: cs.RestartCount, detail: restartDetail(p, cs)})
			if c.Container != "" {
				ok = cs.Ready
			}
			if !cs.Ready && st.pod == nil {
				st.notReady(p, cs)
			}
		}
		if c.Container == "" {
			ok = podReady(p)
		}
		if ok {
			ready = append(ready, p.Name)
		} else if st.pod == nil {
			st.pod = p
			st.since, st.reason = readySince(p), "not Ready"
		}
	}
	st.available = len(ready) > 0
	st.readyPods = fmt.Sprintf("Pod(s) %s Ready", strings.Join(ready, ", "))
	if len(pods) == 0 && d != nil {
		st.noPod, st.since = deploymentWord(d)
	}
	return st
}

// notReady takes the not-ready container cs of Pod p as the one that tells why.
func (st *state) notReady(p *corev1.Pod, cs corev1.ContainerStatus) {
	st.pod, st.container, st.restarted = p, cs.Name, cs.RestartCount
	st.since, st.reason = readySince(p), "not Ready"
	switch {
	case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
		st.reason = cs.State.Waiting.Reason
	case cs.State.Terminated != nil:
		st.reason = "terminated " + cs.State.Terminated.Reason
	case cs.State.Running != nil:
		st.reason = "running, not Ready"
	}
	st.exit = cs.LastTerminationState.Terminated
	if cs.State.Terminated != nil {
		st.exit = cs.State.Terminated
	}
}

// outage is the state as a failure names it.
type outage struct {
	text      string
	lastLine  string
	pod       *corev1.Pod
	container string
}

func (st state) outage() outage {
	since := "since it was first seen"
	if !st.since.IsZero() {
		since = "since " + st.since.UTC().Format("15:04:05")
	}
	if st.pod == nil {
		return outage{text: fmt.Sprintf("%s unavailable %s, no Pod: %s", st.name, since, st.noPod)}
	}
	s := fmt.Sprintf("%s unavailable %s, %s (Pod %s/%s, %d restart(s))", st.name, since, st.reason, st.pod.Namespace, st.pod.Name, st.restarted)
	o := outage{text: s, pod: st.pod, container: st.container}
	if st.exit != nil {
		o.text += ", last exit " + exitWords(st.exit)
		o.lastLine = lastLine(st.exit.Message)
	}
	return o
}

// String is the outage with the last line its container logged, when known.
func (o outage) String() string {
	if o.lastLine == "" {
		return o.text
	}
	return o.text + ": " + o.lastLine
}

func exitWords(t *corev1.ContainerStateTerminated) string {
	s := fmt.Sprintf("%d", t.ExitCode)
	if t.Signal != 0 {
		s += fmt.Sprintf(" (signal %d)", t.Signal)
	}
	if t.Reason != "" {
		s += " " + t.Reason
	}
	return s
}

// restartDetail is a restart as the live line says it.
func restartDetail(p *corev1.Pod, cs corev1.ContainerStatus) string {
	s := fmt.Sprintf("Pod %s/%s container %s restart %d", p.Namespace, p.Name, cs.Name, cs.RestartCount)
	if t := cs.LastTerminationState.Terminated; t != nil {
		s += ", last exit " + exitWords(t)
		if l := lastLine(t.Message); l != "" {
			s += ": " + l
		}
	}
	return s
}

// podReady: the Pod's Ready condition is True (kubelet's, core/v1 PodReady).
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readySince is when the Pod's Ready condition last changed (the kubelet stamps it).
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// deploymentWord is the Deployment's Available condition, in words, and since when.
func deploymentWord(d *appsv1.Deployment) (string, time.Time) {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return fmt.Sprintf("Deployment %s/%s Available=%s %s: %s", d.Namespace, d.Name, c.Status, c.Reason, c.Message), c.LastTransitionTime.Time
		}
	}
	return fmt.Sprintf("Deployment %s/%s has %d of %d replicas available", d.Namespace, d.Name, d.Status.AvailableReplicas, replicas(d)), time.Time{}
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
