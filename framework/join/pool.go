package join

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Pool is one lane pool as the run follows it: the lane's entry, never copied field by field,
// and what the run derives from it. The fixture makes one per lane pool (its names in its
// conformance cluster, its OS family, its kubelet), the join follows it, the specs act on it.
type Pool struct {
	// Spec is the pool as the lane declares it (pools[]). A spec that re-joins a pool with
	// another count of workers follows a copy with Spec.Replicas set.
	Spec lane.Pool
	// Names are the pool's names in its conformance cluster (App).
	Names tenant.PoolNames
	// OS is the family of the pool's class; OSErr says why it has none (an unknown OS).
	OS    osfamily.Family
	OSErr error
	// Kubelet is the version its workers must report.
	Kubelet string
	// App is the conformance cluster the pool is a node group of.
	App *tenant.App
}

// Name is the pool's name (nodeGroups.<name>).
func (p Pool) Name() string { return p.Spec.Name }

// Cluster names the pool's conformance cluster and its release ("cluster pools at Kubernetes
// v1.34.9"), for the reports.
func (p Pool) Cluster() string {
	if p.App == nil {
		return ""
	}
	return p.App.String()
}

// Kubernetes is the Kubernetes cluster the pool's workers join (its Kubernetes app's cluster),
// nil before its control plane answered.
func (p Pool) Kubernetes() *cluster.Cluster {
	if p.App == nil {
		return nil
	}
	return p.App.Cluster
}

// followed is a Pool as one join follows it: Console says its guests' boot (and, for an OS
// that prints it, their join) is judged from their serial consoles, which the watcher's
// console hub reads.
type followed struct {
	Pool
	Console bool
}

// Worker is one joined worker: its Machine, VMI (= KubevirtMachine = VM) and Node, and the
// workload pod that runs on it.
type Worker struct {
	Machine, VMI, Node, WorkloadPod string
}

// Result is a pool that joined.
type Result struct {
	Pool    string
	Workers []Worker
	// Took is the time from the start of the wait to the last workload pod running.
	Took time.Duration
}

// Join follows pool p from its bootstrap template to a running workload pod on each of its
// Nodes. It ends with a *StageError on a terminal state, or of class deadline when ctx ends
// (its deadline is the pools phase's, from the lane budget). Every change of stage or detail
// is one progress line; each stage passed is recorded in the clock.
func (w *Watcher) Join(ctx context.Context, p Pool) (*Result, error) {
	start := time.Now()
	var budget time.Duration
	dl, ok := ctx.Deadline() // zero without one
	if ok {
		budget = dl.Sub(start)
	}
	events, unsubscribe := w.subscribe()
	defer unsubscribe()
	f := followed{Pool: p, Console: w.consoles != nil}
	pool := p.Names.Pool
	c := newCourse(pool, start, dl)
	highest, passedAt := -1, start
	created := map[string]bool{}
	for {
		s, err := w.read(ctx, f)
		if err != nil {
			return nil, err
		}
		out := evaluate(s)
		now := time.Now()
		for _, node := range out.NeedPod {
			if created[node] {
				continue
			}
			created[node] = true
			if err := w.createWorkload(ctx, p, node); err != nil {
				return nil, err
			}
		}
		reached := out.Stage.Index()
		if out.Done {
			reached = doneIndex
		}
		highest, passedAt = w.recordPassed(pool, c, highest, passedAt, reached, now)
		moved := c.look(out.Stage, out.Detail, now)
		appeared, cleared := c.observe(out.Suspects, now)
		if moved || len(appeared)+len(cleared) > 0 {
			w.setProgress(c.cur)
		}
		if moved {
			w.logf(c.cur, now, start, budget, "")
		}
		w.logSuspects(pool, appeared, cleared, now, start, budget)
		if t := out.Terminal; t != nil {
			e := &StageError{Pool: pool, Stage: t.Stage, Class: t.Class, Detail: t.Detail,
				Elapsed: now.Sub(c.cur.Since), Budget: budget, At: now, Suspects: c.cur.Suspects}
			w.logf(Progress{Pool: pool, Stage: t.Stage, Detail: t.Detail, Since: c.cur.Since}, now, start, budget, string(t.Class)+": ")
			return nil, e
		}
		if out.Done {
			return w.result(s, now.Sub(start)), nil
		}
		select {
		case <-ctx.Done():
			return nil, w.platformDown(ctx, c.deadline(budget, time.Now()))
		case <-events:
		}
	}
}

// platformDown makes a deadline failure the platform's when a platform component is
// unavailable as the pool's wait runs out: the pool stood still because what moves it was down.
func (w *Watcher) platformDown(ctx context.Context, e *StageError) *StageError {
	if w.o.Platform == nil {
		return e
	}
	if down := w.o.Platform(context.WithoutCancel(ctx)); len(down) > 0 {
		e.Class, e.Platform = verdict.Platform, down
	}
	return e
}

func (w *Watcher) record(pool string, st Stage, from, to time.Time) {
	if w.o.Clock != nil {
		w.o.Clock.RecordStage(pool, string(st), from, to)
	}
}

// logf writes one progress line: when, pool, stage, detail, time at the stage, and the time
// spent of the wait's budget.
func (w *Watcher) logf(p Progress, now, start time.Time, budget time.Duration, prefix string) {
	ceiling := "no deadline"
	if budget > 0 {
		ceiling = budget.Round(time.Second).String()
	}
	fmt.Fprintf(w.o.Log, "%s pool %s: %s: %s%s (at this stage %s; %s of %s)\n", now.UTC().Format("15:04:05.000"),
		p.Pool, p.Stage, prefix, p.Detail, since(now.Sub(p.Since)), since(now.Sub(start)), ceiling)
}

func (w *Watcher) result(s *snapshot, took time.Duration) *Result {
	r := &Result{Pool: s.Pool.Names.Pool, Took: took}
	for _, m := range s.Machines {
		if m.Node == nil || m.Workload == nil || m.Workload.Status.Phase != corev1.PodRunning {
			continue
		}
		r.Workers = append(r.Workers, Worker{Machine: m.Machine.Name, VMI: m.vmName(), Node: m.Node.Name,
			WorkloadPod: m.Workload.Name})
	}
	return r
}

// createWorkload creates the workload pod pinned to node: the lane's image by digest,
// recordPassed records in the clock the stages passed since the last look, in order, below
// reached; several at once get the same instant. It returns the highest stage passed since the
// join began and when the last one was passed.
func (w *Watcher) recordPassed(pool string, c *course, highest int, passedAt time.Time, reached int, now time.Time) (int, time.Time) {
	for i := highest + 1; i < reached; i++ {
		if i < 0 {
			continue
		}
		from := passedAt
		if i == c.cur.Stage.Index() {
			from = c.cur.Since
		}
		w.record(pool, Stages()[i], from, now)
		passedAt = now
	}
	if reached-1 > highest {
		highest = reached - 1
	}
	return highest, passedAt
}

// logSuspects writes one progress line for each suspect that appeared and each that cleared.
func (w *Watcher) logSuspects(pool string, appeared, cleared []Suspect, now, start time.Time, budget time.Duration) {
	for _, s := range appeared {
		w.logf(Progress{Pool: pool, Stage: s.Stage, Detail: s.Detail, Since: s.Since}, now, start, budget,
			fmt.Sprintf("suspect %s (%s): ", s.Class, s.Object))
	}
	for _, s := range cleared {
		w.logf(Progress{Pool: pool, Stage: s.Stage, Detail: s.Detail, Since: s.Since}, now, start, budget,
			fmt.Sprintf("suspect %s cleared (%s): ", s.Class, s.Object))
	}
}

// nodeName set (no scheduler), no tolerations of its own.
func (w *Watcher) createWorkload(ctx context.Context, p Pool, node string) error {
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: tenant.WorkloadPod(node), Namespace: tenant.WorkloadNamespace,
			Labels: map[string]string{tenant.LabelManagedBy: tenant.ManagedBy, LabelPool: p.Names.Pool},
		},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &zero,
			Containers:                    []corev1.Container{{Name: "workload", Image: w.o.WorkloadImage}},
		},
	}
	err := w.o.Tenant.Client.Create(ctx, pod)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("pool %s: creating workload pod %s/%s on Node %s in the tenant cluster: %w",
			p.Names.Pool, pod.Namespace, pod.Name, node, err)
	}
	return nil
}

// LabelPool marks the harness's workload pods with their pool.
const LabelPool = "e2e.cozystack.io/pool"
