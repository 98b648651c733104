package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Watch names the objects a wait follows: one resource in one namespace ("" for all or for
// cluster-scoped ones).
type Watch struct {
	GVR       schema.GroupVersionResource
	Namespace string
}

// Judge looks at every object the watch holds and says whether the wait is over, and if not,
// where it is stuck ("deployment virt-api: Available=False (MinimumReplicasUnavailable)").
// A non-nil error is a terminal state: the wait ends at once with it.
type Judge func(objs []*unstructured.Unstructured) (done bool, detail string, err error)

// StuckError is a wait that ran out of its context before its condition held.
type StuckError struct {
	What    string
	Detail  string
	Elapsed time.Duration
	Budget  time.Duration
}

func (e *StuckError) Error() string {
	return fmt.Sprintf("%s: stuck for %s of %s: %s", e.What, e.Elapsed.Round(time.Second), e.Budget.Round(time.Second), e.Detail)
}

// Wait watches w until judge says done, its context ends (a *StuckError with the last detail),
// or judge returns a terminal error. It logs what it waits for and how long it has left, and
// every change of detail.
func Wait(ctx context.Context, dyn dynamic.Interface, w Watch, what string, log io.Writer, judge Judge) error {
	start := time.Now()
	var budget time.Duration
	if dl, ok := ctx.Deadline(); ok {
		budget = time.Until(dl)
	}
	logf(log, "waiting up to %s for %s", budget.Round(time.Second), what)
	ri := dyn.Resource(w.GVR).Namespace(w.Namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return ri.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, o)
		},
	}
	var (
		store    cache.Store
		detail   = "nothing listed yet"
		terminal error
	)
	eval := func() (bool, error) {
		var objs []*unstructured.Unstructured
		for _, o := range store.List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				objs = append(objs, u)
			}
		}
		done, d, err := judge(objs)
		if err != nil {
			terminal = err
			return false, err
		}
		if d != detail && !done {
			left := time.Duration(0)
			if dl, ok := ctx.Deadline(); ok {
				left = time.Until(dl)
			}
			logf(log, "%s: %s (%s left)", what, d, left.Round(time.Second))
		}
		detail = d
		return done, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{},
		func(s cache.Store) (bool, error) { store = s; return eval() },
		func(watch.Event) (bool, error) { return eval() })
	switch {
	case err == nil:
		logf(log, "%s: done in %s", what, time.Since(start).Round(time.Second))
		return nil
	case terminal != nil:
		return fmt.Errorf("%s: %w", what, terminal)
	case ctx.Err() != nil || errors.Is(err, watchtools.ErrWatchClosed) || isWaitTimeout(err):
		return &StuckError{What: what, Detail: detail, Elapsed: time.Since(start), Budget: budget}
	default:
		return fmt.Errorf("%s: watching %s: %w", what, w.GVR.Resource, err)
	}
}

func isWaitTimeout(err error) bool {
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || err.Error() == "timed out waiting for the condition")
}

func logf(w io.Writer, format string, args ...any) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

// condition returns the status, reason and message of condition typ in status.conditions.
func condition(u *unstructured.Unstructured, typ string) (status, reason, message string, ok bool) {
	raw, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
	conds, _ := raw.([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg, true
		}
	}
	return "", "", "", false
}
