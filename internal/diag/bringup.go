package diag

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// BringUpOptions describe a bring-up that failed before any suite ran.
type BringUpOptions struct {
	Budget
	Artifacts *Artifacts
	Manifest  *Manifest
	// Process names who collects in the manifest; "harness" when empty.
	Process string
	// Management is the management cluster, or nil when it never came up.
	Management *cluster.Cluster
	// Phase is the lane phase that failed ("cluster", "tenant") and Err its error.
	Phase string
	Err   error
	// Namespaces to read; none means every namespace.
	Namespaces []string
	// Limits bound the files; the zero value means DefaultLimits.
	Limits Limits
	Now    func() time.Time
}

// CollectBringUp gathers what explains a failed bring-up (the orchestrator calls it when the
// substrate or a phase before the suites fails): the error itself, Warning events, Pods that
// are not ready with their logs and previous logs, the HelmReleases' Ready conditions, and a
// resource dump. With no management cluster it records why nothing could be read and points at
// the substrate's own evidence (Artifacts/substrate).
func CollectBringUp(ctx context.Context, o BringUpOptions) Result {
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Process == "" {
		o.Process = "harness"
	}
	start := o.Now()
	errText := "(no error given)"
	if o.Err != nil {
		errText = o.Err.Error()
	}
	head := fmt.Sprintf("bring-up failed in phase %s at %s (epoch %s seconds):\n%s\n", o.Phase, stamp(start), epoch(start), errText)
	_, _ = o.Artifacts.WriteFile("bring-up.txt", []byte(head), 64<<10)
	evidence := []string{"bring-up.txt"}
	if _, err := os.Stat(o.Artifacts.Path("substrate")); err == nil {
		evidence = append(evidence, "substrate")
	}
	if o.Management == nil {
		e := Entry{Name: "bring-up", Scope: "cluster " + Management, Process: o.Process, Status: Failed, Start: start,
			Paths: []string{"bring-up.txt"}, Error: "the management cluster never came up, so nothing could be read from it: " + errText}
		o.Manifest.Add(e)
		return Result{Entries: []Entry{e}, Evidence: evidence, Duration: o.Now().Sub(start)}
	}
	if _, err := LearnSecrets(ctx, o.Management, o.Artifacts.Redactor()); err != nil {
		// Without the Secret values nothing read from the cluster may be written.
		e := Entry{Name: "bring-up", Scope: "cluster " + Management, Process: o.Process, Status: Failed, Start: start,
			Paths: []string{"bring-up.txt"}, Error: "the Secret values could not be learned, so nothing was collected: " + err.Error()}
		o.Manifest.Add(e)
		return Result{Entries: []Entry{e}, Evidence: evidence, Duration: o.Now().Sub(start)}
	}
	r, err := newReader(Management, o.Management)
	if err != nil {
		e := Entry{Name: "bring-up", Scope: "cluster " + Management, Process: o.Process, Status: Failed, Start: start, Error: err.Error()}
		o.Manifest.Add(e)
		return Result{Entries: []Entry{e}, Evidence: evidence, Duration: o.Now().Sub(start)}
	}
	nss := o.Namespaces
	if len(nss) == 0 {
		nss = []string{""}
	}
	cs := []collector{bringUpEvents(r, nss), bringUpPods(r, nss), bringUpReleases(r, nss)}
	sc := &scene{mgmt: r, pools: &pools{}, now: o.Now}
	for _, ns := range nss {
		c := sc.resources(r, ns)
		c.key = ""
		c.share = 0.5 / float64(len(nss))
		if ns != "" {
			c.scope += " namespace " + ns
		}
		cs = append(cs, c)
	}
	entries := runCollectors(ctx, o.Artifacts, o.Manifest, o.Process, o.Limits, o.Now, o.Budget, cs, nil)
	seen := map[string]bool{}
	for _, n := range []string{"events", "pods", "helmreleases", "resources"} {
		for _, e := range entries {
			for _, p := range e.Paths {
				if p = evidencePath(e, p); e.Name == n && !seen[p] {
					seen[p] = true
					evidence = append(evidence, p)
				}
			}
		}
	}
	return Result{Entries: entries, Evidence: evidence, Duration: o.Now().Sub(start)}
}

func bringUpEvents(r *reader, nss []string) collector {
	return collector{name: "events", scope: "cluster " + Management, share: 0.1, bytes: 1 << 20,
		run: func(ctx context.Context, w *work) error {
			var lines []string
			for _, ns := range nss {
				list, err := r.c.Kube.CoreV1().Events(ns).List(ctx, listOptions(""))
				if err != nil {
					return fmt.Errorf("listing events of the management cluster: %w", err)
				}
				for i := range list.Items {
					e := &list.Items[i]
					w.items++
					lines = append(lines, fmt.Sprintf("%s %-7s %-24s %s %s/%s: %s (x%d)", stamp(join.EventTime(e)), e.Type, e.Reason,
						e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message, max(e.Count, 1)))
				}
			}
			sort.Strings(lines)
			return w.file("clusters/management/events.txt", []byte(strings.Join(lines, "\n")+"\n"), 1<<20)
		}}
}

// bringUpPods summarises every Pod that is not Running and ready and reads its logs.
func bringUpPods(r *reader, nss []string) collector {
	return collector{name: "pods", scope: "cluster " + Management, share: 0.25, bytes: 4 << 20, count: 24,
		run: func(ctx context.Context, w *work) error {
			var sum []string
			count := 0
			var errs []error
			sc := &scene{}
			for _, ns := range nss {
				pods, err := r.pods(ctx, ns)
				if err != nil {
					return err
				}
				for i := range pods {
					p := &pods[i]
					if podHealthy(p) {
						continue
					}
					w.items++
					sum = append(sum, fmt.Sprintf("Pod %s/%s on %s: phase %s%s", p.Namespace, p.Name, orNone(p.Spec.NodeName), p.Status.Phase, restartsOf(p)))
					if _, err := sc.podLogs(ctx, w, r, p, "clusters/management/logs/"+p.Namespace, &count, w.limits.Logs); err != nil {
						errs = append(errs, err)
					}
				}
			}
			for _, err := range errs {
				w.note("%v", err)
			}
			if len(sum) == 0 {
				w.note("every Pod is running and ready")
				return nil
			}
			return w.file("clusters/management/pods.txt", []byte(strings.Join(sum, "\n")+"\n"), 512<<10)
		}}
}

func podHealthy(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// bringUpReleases writes each HelmRelease's Ready condition and its history's last status.
func bringUpReleases(r *reader, nss []string) collector {
	return collector{name: "helmreleases", scope: "cluster " + Management, share: 0.05, bytes: 256 << 10,
		run: func(ctx context.Context, w *work) error {
			var lines []string
			for _, ns := range nss {
				list, err := r.list(ctx, tenant.HelmReleaseGVK, ns)
				if errors.Is(err, ErrNotServed) {
					w.note("%v", err)
					return nil
				}
				if err != nil {
					return err
				}
				for i := range list {
					w.items++
					lines = append(lines, releaseLine(&list[i]))
				}
			}
			if len(lines) == 0 {
				return nil
			}
			return w.file("clusters/management/helmreleases.txt", []byte(strings.Join(lines, "\n")+"\n"), 256<<10)
		}}
}

func releaseLine(u *unstructured.Unstructured) string {
	st := stateOf(u)
	ready, ok := st.conds["Ready"]
	line := fmt.Sprintf("HelmRelease %s/%s: ", u.GetNamespace(), u.GetName())
	if !ok {
		return line + "no Ready condition"
	}
	line += fmt.Sprintf("Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
	hist, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
	if len(hist) > 0 {
		if m, ok := hist[0].(map[string]any); ok {
			line += fmt.Sprintf(" (last history status %s)", str(m["status"]))
		}
	}
	return line
}
