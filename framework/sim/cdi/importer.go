package cdi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cozystack/cozy-e2e/framework/sim/faults"
	"github.com/cozystack/cozy-e2e/framework/sim/names"
	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/sim/standin"
)

const (
	// progressSteps is how many progress updates one import makes.
	progressSteps = 10
	// stallAt is where an import stalls under disk-import-stall.
	stallAt = 3.14
	// podRunningReason is CDI's Running condition reason while the importer runs.
	podRunningReason = "Pod is running"
)

// newImporter is CDI's importer Pod for dv: owned by the claim, restartPolicy OnFailure.
func newImporter(dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim, src source) *corev1.Pod {
	ctl := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: dv.Namespace, Name: names.ImporterPod(dv.Name),
			Labels: map[string]string{"app": "containerized-data-importer", "app.kubernetes.io/component": "storage",
				"app.kubernetes.io/managed-by": "cdi-controller", "cdi.kubevirt.io": "importer", "prometheus.cdi.kubevirt.io": "true"},
			Annotations:     map[string]string{"cdi.kubevirt.io/storage.createdByController": "yes"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: pvc.Name, UID: pvc.UID, Controller: &ctl, BlockOwnerDeletion: &ctl}},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers: []corev1.Container{{
				Name: ImporterContainer, Image: ImporterImage, Args: []string{"-v=1"},
				Env: []corev1.EnvVar{
					{Name: "IMPORTER_SOURCE", Value: src.kind}, {Name: "IMPORTER_ENDPOINT", Value: src.url},
					{Name: "IMPORTER_CONTENTTYPE", Value: "kubevirt"},
					{Name: "IMPORTER_IMAGE_SIZE", Value: quantity(pvc)},
				},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("60M")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "cdi-data-vol", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "cdi-data-vol", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}},
		},
	}
}

func quantity(pvc *corev1.PersistentVolumeClaim) string {
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.String()
}

// importer is one reconcile of a running importer.
type importer struct {
	r     *dvReconciler
	dv    *cdiv1.DataVolume
	pvc   *corev1.PersistentVolumeClaim
	pod   *corev1.Pod
	src   source
	pool  standin.Pool
	known bool // the DataVolume belongs to a Machine's VM (its pool is known)
}

func (m *importer) env() *simenv.Env { return m.r.env }

func (m *importer) step(ctx context.Context, bound cdiv1.DataVolumeCondition) (ctrl.Result, error) {
	if len(m.pod.Status.ContainerStatuses) == 0 {
		return ctrl.Result{}, nil // kwok has not started it yet; its update brings us back
	}
	if m.known && m.pool.Active(m.env(), faults.DiskImportRefused) {
		return m.refused(ctx, bound)
	}
	tick := m.env().Latency(LatencyImport) / progressSteps
	now := m.env().Now()
	progress := parseProgress(m.dv.Status.Progress)
	running := cond(cdiv1.DataVolumeRunning, corev1.ConditionTrue, podRunningReason, "")
	ready := cond(cdiv1.DataVolumeReady, corev1.ConditionFalse, "TransferRunning", "")
	if m.dv.Status.Phase != cdiv1.ImportInProgress {
		m.log(now, "importer.go:107] Starting importer", "importer.go:183] begin import process")
		m.log(now, m.sourceLines()...)
		m.log(now, "data-processor.go:260] New phase: TransferDataFile")
		running.LastHeartbeatTime = metav1.NewTime(now)
		m.r.attempts.Store(m.pod.UID, now)
		if err := m.r.annotate(ctx, m.pvc, m.pod, "true", podRunningReason, ""); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: tick}, m.r.setStatus(ctx, m.dv, cdiv1.ImportInProgress, "0.00%", bound, ready, running)
	}
	stall := m.known && m.pool.Active(m.env(), faults.DiskImportStall)
	if stall && progress >= stallAt {
		return ctrl.Result{}, nil // stalled: no more progress, ever
	}
	last, ok := m.r.attempts.Load(m.pod.UID)
	if !ok {
		last = heartbeat(m.dv.Status.Conditions, cdiv1.DataVolumeRunning) // after a restart of the sim
	}
	elapsed := now.Sub(last.(time.Time))
	if elapsed < tick {
		return ctrl.Result{RequeueAfter: tick - elapsed}, nil
	}
	progress += float64(int(elapsed/tick)) * 100 / progressSteps
	if stall && progress >= stallAt {
		progress = stallAt
		_ = m.env().Observe(simenv.Observation{Fault: faults.DiskImportStall, Pool: m.pool.Name, Object: "DataVolume/" + m.dv.Namespace + "/" + m.dv.Name,
			Detail: fmt.Sprintf("import stalled at %.2f%%", progress)})
	}
	if progress >= 100 {
		m.log(now, "prometheus.go:78] 100.00", "data-processor.go:260] New phase: Resize",
			"data-processor.go:260] New phase: Complete", "importer.go:240] Import Complete")
		return ctrl.Result{}, m.finish(ctx, now)
	}
	m.log(now, fmt.Sprintf("prometheus.go:78] %.2f", progress))
	running.LastHeartbeatTime = metav1.NewTime(now)
	m.r.attempts.Store(m.pod.UID, last.(time.Time).Add(time.Duration(int(elapsed/tick))*tick))
	next := tick
	if stall && progress >= stallAt {
		next = 0
	}
	return ctrl.Result{RequeueAfter: next}, m.r.setStatus(ctx, m.dv, cdiv1.ImportInProgress, fmt.Sprintf("%.2f%%", progress), bound, ready, running)
}

// finish ends the importer as the container exiting 0 does; the Pod's update completes the
// DataVolume.
func (m *importer) finish(ctx context.Context, now time.Time) error {
	p := m.pod.DeepCopy()
	started := metav1.NewTime(now)
	if r := p.Status.ContainerStatuses[0].State.Running; r != nil {
		started = r.StartedAt
	}
	p.Status.Phase = corev1.PodSucceeded
	p.Status.ContainerStatuses[0].Ready = false
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Reason: "Completed", Message: "Import Complete", StartedAt: started, FinishedAt: metav1.NewTime(now)}}
	setPodReady(p, false, "PodCompleted", now)
	return m.r.c.Status().Update(ctx, p)
}

// refused plays an importer the registry refuses: each attempt ends with exit code 1 and
// CDI's termination message, the kubelet restarts it after a back-off, and the DataVolume
// reports it.
func (m *importer) refused(ctx context.Context, bound cdiv1.DataVolumeCondition) (ctrl.Result, error) {
	attempt := m.env().Latency(LatencyImport) / 5
	now := m.env().Now()
	p := m.pod.DeepCopy()
	cs := &p.Status.ContainerStatuses[0]
	msg := m.refusal()
	last := now
	if v, ok := m.r.attempts.Load(p.UID); ok {
		last = v.(time.Time)
	} else {
		m.r.attempts.Store(p.UID, now)
	}
	switch {
	case cs.State.Running != nil:
		if wait := attempt - now.Sub(last); wait > 0 {
			if m.dv.Status.Phase != cdiv1.ImportInProgress {
				return ctrl.Result{RequeueAfter: wait}, m.r.setStatus(ctx, m.dv, cdiv1.ImportInProgress, "N/A", bound,
					cond(cdiv1.DataVolumeReady, corev1.ConditionFalse, "TransferRunning", ""), cond(cdiv1.DataVolumeRunning, corev1.ConditionTrue, podRunningReason, ""))
			}
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		if cs.RestartCount == 0 { // a restarted instance logged its start when it started
			m.log(now, "importer.go:107] Starting importer", "importer.go:183] begin import process")
		}
		m.log(now, m.sourceLines()...)
		m.logError(now, "importer.go:370] "+msg)
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", Message: msg, StartedAt: cs.State.Running.StartedAt, FinishedAt: metav1.NewTime(now)}}
		cs.RestartCount++
		cs.Ready, cs.Started = false, ptr(false)
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off 10s restarting failed container=%s pod=%s_%s(%s)", ImporterContainer, p.Name, p.Namespace, p.UID)}}
		setPodReady(p, false, "ContainersNotReady", now)
		if err := m.r.c.Status().Update(ctx, p); err != nil {
			return ctrl.Result{}, err
		}
		m.r.attempts.Store(p.UID, now)
		m.r.event(m.pvc, corev1.EventTypeWarning, "ErrImportFailed", msg)
		if cs.RestartCount == 1 {
			_ = m.env().Observe(simenv.Observation{Fault: faults.DiskImportRefused, Pool: m.pool.Name, Object: "DataVolume/" + m.dv.Namespace + "/" + m.dv.Name,
				Detail: "Running=False Error: " + msg})
		}
		if err := m.r.annotate(ctx, m.pvc, p, "false", "Error", msg); err != nil {
			return ctrl.Result{}, err
		}
		old := m.dv.Status.DeepCopy()
		if err := m.r.setStatusRestarts(ctx, m.dv, cdiv1.ImportInProgress, "N/A", cs.RestartCount, bound,
			cond(cdiv1.DataVolumeReady, corev1.ConditionFalse, "", ""), cond(cdiv1.DataVolumeRunning, corev1.ConditionFalse, "Error", msg)); err != nil {
			return ctrl.Result{}, err
		}
		for _, c := range old.Conditions {
			if c.Type == cdiv1.DataVolumeRunning && c.Message == msg {
				return ctrl.Result{RequeueAfter: attempt}, nil
			}
		}
		m.r.event(m.dv, corev1.EventTypeWarning, "Error", msg)
		return ctrl.Result{RequeueAfter: attempt}, nil
	case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
		if wait := attempt - now.Sub(last); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
		cs.Ready, cs.Started = true, ptr(true)
		setPodReady(p, true, "", now)
		m.restartLog(now)
		if err := m.r.c.Status().Update(ctx, p); err != nil {
			return ctrl.Result{}, err
		}
		m.r.attempts.Store(p.UID, now)
		return ctrl.Result{RequeueAfter: attempt}, nil
	}
	return ctrl.Result{}, nil
}

// refusal is CDI's termination message for a registry answering 401.
func (m *importer) refusal() string {
	if m.src.kind == "registry" {
		ref := strings.TrimPrefix(m.src.url, "docker://")
		return "Unable to process data: Failed to read registry image: Error retrieving image: reading manifest in " + ref +
			": received unexpected HTTP status: 401 Unauthorized"
	}
	return "Unable to connect to http data source: expected status code 200, got 401. Status: 401 Unauthorized"
}

func (m *importer) sourceLines() []string {
	if m.src.kind == "registry" {
		return []string{"registry-datasource.go:172] Copying proxy certs", "registry-datasource.go:57] Error creating allowed certs, using empty",
			"transport.go:193] Downloading image from '" + m.src.url + "', copying file from 'disk' to '/scratch'"}
	}
	return []string{fmt.Sprintf("http-datasource.go:389] Attempting to get object %q via http client", m.src.url),
		"http-datasource.go:159] Validating image"}
}

// log appends klog lines to the importer container's log.
func (m *importer) log(at time.Time, lines ...string) { m.write(at, "I", lines) }

// restartLog: the importer's new instance writes a new log; the last one's is its previous.
func (m *importer) restartLog(at time.Time) {
	if m.env().Logs == nil {
		return
	}
	if path, err := m.env().Logs.ContainerLog(m.pod.Namespace, m.pod.Name, ImporterContainer); err == nil && simenv.RestartContainerLog(path) == nil {
		m.log(at, "importer.go:107] Starting importer", "importer.go:183] begin import process")
	}
}

func (m *importer) logError(at time.Time, lines ...string) { m.write(at, "E", lines) }

func (m *importer) write(at time.Time, sev string, lines []string) {
	if m.env().Logs == nil || len(lines) == 0 {
		return
	}
	path, err := m.env().Logs.ContainerLog(m.pod.Namespace, m.pod.Name, ImporterContainer)
	if err != nil {
		return
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fmt.Sprintf("%s%s       1 %s", sev, at.UTC().Format("0102 15:04:05.000000"), l)
	}
	_ = simenv.WriteContainerLog(path, at, out...)
}

func setPodReady(p *corev1.Pod, ready bool, reason string, now time.Time) {
	s := corev1.ConditionFalse
	if ready {
		s, reason = corev1.ConditionTrue, ""
	}
	for i, c := range p.Status.Conditions {
		if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status != s {
			p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = s, reason
			p.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
		}
	}
}

func parseProgress(p cdiv1.DataVolumeProgress) float64 {
	f, err := strconv.ParseFloat(strings.TrimSuffix(string(p), "%"), 64)
	if err != nil {
		return 0
	}
	return f
}

func ptr[T any](v T) *T { return &v }
