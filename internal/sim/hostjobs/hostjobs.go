// Package hostjobs runs the containers of Job pods on the host, as the kubelet of the kwok Node
// they are scheduled to would run them. The Cozystack Kubernetes chart's Jobs (talos-reconcile,
// bootstrap-token-tenant, oidc-bootstrap) are kubectl shell scripts in an alpine/k8s image; their
// commands run here for real with the host's shell and tools and the kubectl `make tools` built,
// as the pod's ServiceAccount (a token the apiserver issues for it), with the pod's environment,
// Secrets, ConfigMaps and projected volumes materialised in a folder of the pod's own. The
// output is the container's log (`kubectl logs`), the exit code the container's: a pod ends
// Succeeded or Failed, or, under restartPolicy OnFailure, restarts in place with the kubelet's
// back-off until the Job controller gives up on it. kwok plays every other pod (the world leaves
// its pod-complete stage out, so a Job pod stays Running for this runner).
//
// What differs from a kubelet: no image is pulled and no container isolation is made (the
// commands run on the host as the harness's user, with the host's tools; the image's /bin/sh,
// busybox ash, is the host's bash run as sh); a volume is materialised under the pod's
// folder rather than mounted, and its mount path is rewritten to that folder in the container's
// environment, command and arguments; the ServiceAccount's credentials reach kubectl as a
// kubeconfig (KUBECONFIG) instead of the in-cluster files, unless the pod sets its own.
package hostjobs

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// Options configure the runner.
type Options struct {
	// Kubectl is the kubectl binary the containers find on their PATH.
	Kubectl string
	// APIServerURL and APIServerCA reach the management apiserver the pods' ServiceAccounts
	// belong to (directly, as a pod reaches kubernetes.default).
	APIServerURL string
	APIServerCA  []byte
	// Logs places the containers' logs.
	Logs simenv.LogSink
	// Dir holds each pod's folder (volumes, home); it must exist.
	Dir string
	// Log receives a line per finished container, for people.
	Log io.Writer
}

// Setup registers the runner on mgr; running containers stop with the manager.
func Setup(mgr manager.Manager, o Options) error {
	if o.Log == nil {
		o.Log = io.Discard
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	base, stop := context.WithCancel(context.Background())
	r := &runner{o: o, c: mgr.GetClient(), cs: cs, base: base, running: map[types.UID]context.CancelFunc{}, byName: map[types.NamespacedName]types.UID{}}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		stop()
		r.wg.Wait()
		return nil
	})); err != nil {
		stop()
		return err
	}
	jobPod := predicate.NewPredicateFuncs(func(o client.Object) bool { return ownedByJob(o) })
	return ctrl.NewControllerManagedBy(mgr).Named("sim-host-jobs").
		For(&corev1.Pod{}, builder.WithPredicates(jobPod)).
		Complete(r)
}

func ownedByJob(o client.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == "Job" && ref.APIVersion == batchv1.SchemeGroupVersion.String() {
			return true
		}
	}
	return false
}

type runner struct {
	o    Options
	c    client.Client
	cs   kubernetes.Interface
	base context.Context
	wg   sync.WaitGroup

	mu      sync.Mutex
	running map[types.UID]context.CancelFunc
	byName  map[types.NamespacedName]types.UID
}

// Reconcile starts running a Job pod kwok made Running, once, and stops it when it goes.
func (r *runner) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.c.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cancel, started := r.running[pod.UID]
	if pod.DeletionTimestamp != nil {
		if started {
			cancel()
		}
		return ctrl.Result{}, nil
	}
	if started || pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodRunning {
		return ctrl.Result{}, nil
	}
	dir := filepath.Join(r.o.Dir, pod.Namespace+"_"+pod.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ctrl.Result{}, err
	}
	runCtx, cancel := context.WithCancel(r.base)
	r.running[pod.UID] = cancel
	r.byName[req.NamespacedName] = pod.UID
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.run(runCtx, pod.DeepCopy(), dir)
	}()
	return ctrl.Result{}, nil
}

// forget stops the run of a pod that is gone.
func (r *runner) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid, ok := r.byName[key]; ok {
		if cancel := r.running[uid]; cancel != nil {
			cancel()
		}
		delete(r.byName, key)
	}
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Log, "sim: "+format+"\n", args...)
}
