package join

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Pool is one worker pool to follow.
type Pool struct {
	Names tenant.PoolNames
	// Class is the NodeGroupClass the pool names and OS its family.
	Class string
	OS    osfamily.Family
	// Replicas is how many workers must join.
	Replicas int
	// Console says the guest's boot (and, for an OS that prints it, its join) is judged from
	// its serial console, which the run's console hub reads (Options.Consoles).
	Console bool
	// WorkloadImage is the pod image pinned to each Node, by digest (lane workload).
	WorkloadImage string
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
	if p.Console && w.consoles == nil {
		return nil, fmt.Errorf("join: pool %s judges its boot from the serial console, but the watcher was started without a console hub (join.Options.Consoles)", p.Names.Pool)
	}
	start := time.Now()
	var budget time.Duration
	dl, ok := ctx.Deadline() // zero without one
	if ok {
		budget = dl.Sub(start)
	}
	events, unsubscribe := w.subscribe()
	defer unsubscribe()
	pool := p.Names.Pool
	c := newCourse(pool, start, dl)
	highest, passedAt := -1, start
	created := map[string]bool{}
	for {
		s, err := w.read(ctx, p)
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
		// Stages passed since the last look, in order; several at once get the same instant.
		reached := out.Stage.Index()
		if out.Done {
			reached = doneIndex
		}
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
		moved := c.look(out.Stage, out.Detail, now)
		appeared, cleared := c.observe(out.Suspects, now)
		if moved || len(appeared)+len(cleared) > 0 {
			w.setProgress(c.cur)
		}
		if moved {
			w.logf(c.cur, now, start, budget, "")
		}
		for _, s := range appeared {
			w.logf(Progress{Pool: pool, Stage: s.Stage, Detail: s.Detail, Since: s.Since}, now, start, budget,
				fmt.Sprintf("suspect %s (%s): ", s.Class, s.Object))
		}
		for _, s := range cleared {
			w.logf(Progress{Pool: pool, Stage: s.Stage, Detail: s.Detail, Since: s.Since}, now, start, budget,
				fmt.Sprintf("suspect %s cleared (%s): ", s.Class, s.Object))
		}
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
			Containers:                    []corev1.Container{{Name: "workload", Image: p.WorkloadImage}},
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
