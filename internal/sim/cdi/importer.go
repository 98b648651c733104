package cdi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

const (
	// progressSteps is how many progress lines one import logs.
	progressSteps = 10
	// stallAt is where an import stalls under disk-import-stall.
	stallAt = 3.14
	// exitedFor is how long a failed importer shows its terminated state before the kubelet's
	// back-off puts it in CrashLoopBackOff (the kubelet reports the exit on its next pod sync).
	exitedFor = 500 * time.Millisecond
)

// dataVolumeKind is read from a claim's owner reference; the stand-in reads DataVolumes' metadata
// only, to learn the VM (and so the pool) an importer works for, and never writes one.
var dataVolumeKind = schema.GroupVersionKind{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"}

// setupImporter plays the importer container of each importer Pod cdi-controller creates: its
// labels app=containerized-data-importer and cdi.kubevirt.io=importer, its one container importer
// (containerized-data-importer v1.64.0 pkg/controller/import-controller.go lines 938-942, 991).
func setupImporter(mgr manager.Manager, env *simenv.Env) error {
	isImporter := predicate.NewPredicateFuncs(func(o client.Object) bool {
		l := o.GetLabels()
		// CDI's real importer runs on a real Node.
		p, ok := o.(*corev1.Pod)
		return l["app"] == "containerized-data-importer" && l["cdi.kubevirt.io"] == ImporterContainer && !(ok && env.RealNode(p.Spec.NodeName))
	})
	return ctrl.NewControllerManagedBy(mgr).Named("sim-cdi-importer").
		For(&corev1.Pod{}, builder.WithPredicates(isImporter)).
		Complete(&importers{c: mgr.GetClient(), env: env})
}

// importers holds, per importer container instance (pod UID and restart count), when it started:
// Pod status times are whole seconds, too coarse for the sim's latencies.
type importers struct {
	c       client.Client
	env     *simenv.Env
	started sync.Map // instanceKey -> time.Time
}

type instanceKey struct {
	uid      string
	restarts int32
}

func (r *importers) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.c.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pod.DeletionTimestamp != nil || len(pod.Status.ContainerStatuses) == 0 || pod.Status.Phase == corev1.PodSucceeded || r.env.RealNode(pod.Spec.NodeName) {
		return ctrl.Result{}, nil // kwok has not started it yet, or it is done
	}
	cs := pod.Status.ContainerStatuses[0]
	pool, known, err := r.poolOf(ctx, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	m := &importer{r: r, pod: pod, pool: pool, known: known, now: r.env.Now()}
	switch {
	case cs.State.Running != nil:
		return m.run(ctx)
	case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
		return m.backOff(ctx)
	case cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff":
		return m.restart(ctx)
	}
	return ctrl.Result{}, nil
}

// poolOf walks the importer's owners: its claim (import-controller.go lines 943-951), the
// claim's DataVolume (the DataVolume controller owns the claim it creates,
// pkg/controller/datavolume/controller-base.go addOwnerRef), the DataVolume's VirtualMachine
// (KubeVirt creates it from the VM's dataVolumeTemplates), named like its Machine (CAPK).
// known is false for an importer no Machine's VM asked for (no fault applies to it).
func (r *importers) poolOf(ctx context.Context, pod *corev1.Pod) (standin.Pool, bool, error) {
	claim := controllerOf(pod.OwnerReferences, "PersistentVolumeClaim")
	if claim == "" {
		return standin.Pool{}, false, nil
	}
	pvc := &metav1.PartialObjectMetadata{}
	pvc.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"))
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: claim}, pvc); err != nil {
		return standin.Pool{}, false, client.IgnoreNotFound(err)
	}
	dvName := controllerOf(pvc.OwnerReferences, dataVolumeKind.Kind)
	if dvName == "" {
		return standin.Pool{}, false, nil
	}
	dv := &metav1.PartialObjectMetadata{}
	dv.SetGroupVersionKind(dataVolumeKind)
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: dvName}, dv); err != nil {
		return standin.Pool{}, false, client.IgnoreNotFound(err)
	}
	vm := controllerOf(dv.OwnerReferences, "VirtualMachine")
	if vm == "" {
		return standin.Pool{}, false, nil
	}
	pool, err := standin.PoolOf(ctx, r.c, pod.Namespace, vm)
	if apierrors.IsNotFound(err) {
		return standin.Pool{}, false, nil
	}
	return pool, err == nil, err
}

func controllerOf(refs []metav1.OwnerReference, kind string) string {
	for _, ref := range refs {
		if ref.Kind == kind {
			return ref.Name
		}
	}
	return ""
}

// importer is one reconcile of one importer container instance.
type importer struct {
	r     *importers
	pod   *corev1.Pod
	pool  standin.Pool
	known bool
	now   time.Time
}

func (m *importer) active(n faults.Name) bool { return m.known && m.pool.Active(m.r.env, n) }

func (m *importer) key() instanceKey {
	return instanceKey{string(m.pod.UID), m.pod.Status.ContainerStatuses[0].RestartCount}
}

// since is how long this instance has run; its first reconcile starts its clock and logs its
// start as cmd/cdi-importer/importer.go does (lines 98-150, 182).
func (m *importer) since() time.Duration {
	v, loaded := m.r.started.LoadOrStore(m.key(), m.now)
	if !loaded {
		m.log("importer.go:107] Starting importer", "importer.go:182] begin import process")
		m.log(m.sourceLines()...)
	}
	return m.now.Sub(v.(time.Time))
}

// run is a running importer: it copies the disk, logging its progress as the importer's
// Prometheus progress reader does (pkg/importer/prometheus.go), and exits 0 with its termination
// message once done; refused by the registry it exits 1; stalled it stops making progress.
func (m *importer) run(ctx context.Context) (ctrl.Result, error) {
	elapsed := m.since()
	total := m.r.env.Latency(LatencyImport)
	if m.active(faults.DiskImportRefused) {
		if wait := total/5 - elapsed; wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{}, m.refused(ctx)
	}
	tick := total / progressSteps
	steps := int(elapsed / tick)
	if m.active(faults.DiskImportOOM) && m.env("CACHE_MODE") != "TRYNONE" && steps >= progressSteps/2 {
		return ctrl.Result{}, m.oomKilled(ctx)
	}
	progress := float64(steps) * 100 / progressSteps
	if m.active(faults.DiskImportStall) && progress >= stallAt {
		m.once("stall", func() {
			m.log(fmt.Sprintf("prometheus.go:78] %.2f", stallAt))
			m.serveProgress(stallAt)
			_ = m.r.env.Observe(simenv.Observation{Fault: faults.DiskImportStall, Pool: m.pool.Name, Object: "Pod/" + m.pod.Namespace + "/" + m.pod.Name,
				UID: string(m.pod.UID), Detail: fmt.Sprintf("importer stalled at %.2f%%", stallAt)})
		})
		return ctrl.Result{}, nil // no more progress, ever
	}
	if progress < 100 {
		m.once(fmt.Sprintf("progress-%d", steps), func() {
			m.log(fmt.Sprintf("prometheus.go:78] %.2f", progress))
			m.serveProgress(progress)
		})
		return ctrl.Result{RequeueAfter: time.Duration(steps+1)*tick - elapsed}, nil
	}
	// The success message is the JSON TerminationMessage (cmd/cdi-importer/importer.go lines
	// 199-211; pkg/common/common.go lines 375-382, marshalled in field order), which the
	// importer also logs as it writes it (writeTerminationMessage, line 231).
	done := `{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}`
	m.log("prometheus.go:78] 100.00", "data-processor.go:260] New phase: Resize", "data-processor.go:260] New phase: Complete",
		"importer.go:231] "+done)
	return ctrl.Result{}, m.exit(ctx, 0, "Completed", done)
}

// serveProgress is what the importer serves on its metrics port (container port 8443, TLS): its
// progress counter for the DataVolume it imports for (env OWNER_UID), which cdi-controller reads
// from the pod's IP (CDI v1.64.0 pkg/monitoring/metrics/cdi-importer/import_metrics.go line 10,
// pkg/controller/common/util.go lines 1655-1690). The sim serves the file on the pod's IP.
func (m *importer) serveProgress(progress float64) {
	path := m.r.env.PodMetrics(m.pod.Status.PodIP)
	if path == "" {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	line := fmt.Sprintf("kubevirt_cdi_import_progress_total{ownerUID=%q} %.2f\n", m.env("OWNER_UID"), progress)
	tmp := path + ".tmp"
	if os.WriteFile(tmp, []byte(line), 0o644) == nil {
		_ = os.Rename(tmp, path)
	}
}

// refused: the importer's data source fails, it logs the error, writes "Unable to process data:
// <error>" as its termination message and exits 1 (cmd/cdi-importer/importer.go lines 187-196).
func (m *importer) refused(ctx context.Context) error {
	msg := "Unable to process data: " + m.refusal()
	m.logError("importer.go:192] " + m.refusal())
	if err := m.exit(ctx, 1, "Error", msg); err != nil {
		return err
	}
	if m.pod.Status.ContainerStatuses[0].RestartCount == 0 {
		_ = m.r.env.Observe(simenv.Observation{Fault: faults.DiskImportRefused, Pool: m.pool.Name, Object: "Pod/" + m.pod.Namespace + "/" + m.pod.Name,
			UID: string(m.pod.UID), Detail: "importer exited 1: " + msg})
	}
	return nil
}

// oomKilled: halfway through a buffered-I/O import the kernel kills the importer for its memory
// limit (the page cache of its writes counts against it); the kubelet reports exit 137, reason
// OOMKilled, and no termination message. CDI replaces such a Pod with one importing with direct
// I/O (CACHE_MODE=TRYNONE), which this fault lets finish.
func (m *importer) oomKilled(ctx context.Context) error {
	if err := m.exit(ctx, 137, "OOMKilled", ""); err != nil {
		return err
	}
	return m.r.env.Observe(simenv.Observation{Fault: faults.DiskImportOOM, Pool: m.pool.Name, Object: "Pod/" + m.pod.Namespace + "/" + m.pod.Name,
		UID: string(m.pod.UID), Detail: "importer OOMKilled (exit 137) with buffered I/O"})
}

// refusal is the registry's or web server's answer as the importer reports it: a registry
// answering 401 to the manifest request (containers/image through
// pkg/importer/registry-datasource.go), an HTTP endpoint answering 401
// (pkg/importer/http-datasource.go, "expected status code 200, got %d. Status: %s").
func (m *importer) refusal() string {
	src, ep := m.env("IMPORTER_SOURCE"), m.env("IMPORTER_ENDPOINT")
	if src == "registry" {
		return "Failed to read registry image: Error retrieving image: reading manifest in " + strings.TrimPrefix(ep, "docker://") +
			": received unexpected HTTP status: 401 Unauthorized"
	}
	return "Unable to connect to http data source: expected status code 200, got 401. Status: 401 Unauthorized"
}

// exit ends the container as the kubelet reports it: terminated with the exit code, reason and
// the message the container wrote to its termination-message file; exit 0 under restartPolicy
// OnFailure ends the Pod Succeeded.
func (m *importer) exit(ctx context.Context, code int32, reason, msg string) error {
	p := m.pod.DeepCopy()
	cs := &p.Status.ContainerStatuses[0]
	started := metav1.NewTime(m.now)
	if cs.State.Running != nil {
		started = cs.State.Running.StartedAt
	}
	cs.Ready, cs.Started = false, ptr(false)
	cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, Message: msg, StartedAt: started, FinishedAt: metav1.NewTime(m.now)}}
	if code == 0 {
		p.Status.Phase = corev1.PodSucceeded
		setPodReady(p, false, "PodCompleted", m.now)
	} else {
		setPodReady(p, false, "ContainersNotReady", m.now)
	}
	return m.r.c.Status().Update(ctx, p)
}

// backOff: a container that exited non-zero under restartPolicy OnFailure is restarted after the
// kubelet's crash back-off; meanwhile it waits in CrashLoopBackOff with the exit as its last
// termination state (k8s.io/kubernetes v1.35.4 pkg/kubelet/kuberuntime/kuberuntime_manager.go,
// doBackOff).
func (m *importer) backOff(ctx context.Context) (ctrl.Result, error) {
	cs := m.pod.Status.ContainerStatuses[0]
	if wait := exitedFor - m.now.Sub(cs.State.Terminated.FinishedAt.Time); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	p := m.pod.DeepCopy()
	c := &p.Status.ContainerStatuses[0]
	c.LastTerminationState = corev1.ContainerState{Terminated: c.State.Terminated}
	c.RestartCount++
	c.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off 10s restarting failed container=%s pod=%s_%s(%s)", ImporterContainer, p.Name, p.Namespace, p.UID)}}
	m.r.started.Store(instanceKey{string(p.UID), c.RestartCount}, m.now)
	return ctrl.Result{}, m.r.c.Status().Update(ctx, p)
}

// restart ends the back-off (a fifth of an import, as the sim scales the kubelet's 10 s) with a
// new instance of the container and a new log, the last one's becoming its previous log.
func (m *importer) restart(ctx context.Context) (ctrl.Result, error) {
	v, _ := m.r.started.LoadOrStore(m.key(), m.now)
	if wait := m.r.env.Latency(LatencyImport)/5 - m.now.Sub(v.(time.Time)); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	p := m.pod.DeepCopy()
	c := &p.Status.ContainerStatuses[0]
	c.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(m.now)}}
	c.Ready, c.Started = true, ptr(true)
	setPodReady(p, true, "", m.now)
	if path, err := m.logPath(); err == nil {
		_ = simenv.RestartContainerLog(path)
	}
	m.r.started.Delete(m.key())
	return ctrl.Result{}, m.r.c.Status().Update(ctx, p)
}

// once runs f once per container instance and what.
func (m *importer) once(what string, f func()) {
	if _, loaded := m.r.started.LoadOrStore(struct {
		instanceKey
		what string
	}{m.key(), what}, true); !loaded {
		f()
	}
}

func (m *importer) env(name string) string {
	for _, e := range m.pod.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// sourceLines are what the importer logs as it opens its source
// (pkg/importer/registry-datasource.go, transport.go, http-datasource.go, data-processor.go).
func (m *importer) sourceLines() []string {
	ep := m.env("IMPORTER_ENDPOINT")
	if m.env("IMPORTER_SOURCE") == "registry" {
		return []string{"registry-datasource.go:191] Copying proxy certs",
			"transport.go:199] Downloading image from '" + ep + "', copying file from 'disk' to '/scratch'"}
	}
	return []string{fmt.Sprintf("http-datasource.go:369] Attempting to get object %q via http client", ep), "data-processor.go:266] Validating image"}
}

func (m *importer) log(lines ...string)      { m.write("I", lines) }
func (m *importer) logError(lines ...string) { m.write("E", lines) }

func (m *importer) logPath() (string, error) {
	if m.r.env.Logs == nil {
		return "", fmt.Errorf("no log sink")
	}
	return m.r.env.Logs.ContainerLog(m.pod.Namespace, m.pod.Name, ImporterContainer)
}

// write appends klog lines to the importer container's log.
func (m *importer) write(sev string, lines []string) {
	path, err := m.logPath()
	if err != nil || len(lines) == 0 {
		return
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fmt.Sprintf("%s%s       1 %s", sev, m.now.UTC().Format("0102 15:04:05.000000"), l)
	}
	_ = simenv.WriteContainerLog(path, m.now, out...)
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
