package join

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A workload pod stuck before its sandbox shows the kubelet's latest Warning about it, by the
// event's own time (a series' last observation first), and nothing of other pods or Normal events.
func TestAStuckWorkloadShowsItsLastWarning(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "workload-n1", UID: "p1"}}
	t0 := time.Date(2026, 12, 6, 13, 0, 0, 0, time.UTC)
	ev := func(uid, typ, reason, msg string, last time.Time, series *corev1.EventSeries) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{UID: types.UID("p" + uid)}, Type: typ, Reason: reason, Message: msg,
			LastTimestamp: metav1.NewTime(last), Series: series}
	}
	events := []corev1.Event{
		ev("1", corev1.EventTypeWarning, "FailedCreatePodSandBox", "first", t0, nil),
		ev("1", corev1.EventTypeNormal, "Scheduled", "normal, later", t0.Add(3*time.Minute), nil),
		ev("2", corev1.EventTypeWarning, "Failed", "another pod's, later", t0.Add(4*time.Minute), nil),
		ev("1", corev1.EventTypeWarning, "FailedCreatePodSandBox", "a series, seen last", t0,
			&corev1.EventSeries{Count: 5, LastObservedTime: metav1.NewMicroTime(t0.Add(2 * time.Minute))}),
		ev("1", corev1.EventTypeWarning, "FailedMount", "older", t0.Add(time.Minute), nil),
	}
	if got, want := lastWarning(pod, events), "; last warning FailedCreatePodSandBox: a series, seen last"; got != want {
		t.Errorf("lastWarning = %q, want %q", got, want)
	}
	if got := lastWarning(pod, events[1:3]); got != "" {
		t.Errorf("with no Warning of its own: %q", got)
	}
	long := ev("1", corev1.EventTypeWarning, "Failed", strings.Repeat("x", 1000), t0, nil)
	if got := lastWarning(pod, []corev1.Event{long}); len(got) > maxWarning+40 || !strings.HasSuffix(got, "…") {
		t.Errorf("a long message is not cut: %d bytes", len(got))
	}
}
