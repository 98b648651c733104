package diag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// scene is what the on-failure collectors look at.
type scene struct {
	namespace string
	mgmt      *reader
	// tenants are the tenant clusters, apps the same by their Kubernetes app.
	tenants  []*reader
	apps     map[tenant.Names]*reader
	pools    *pools
	streamed func() []ConsoleRecord
	now      func() time.Time
}

// tenantOf is the tenant cluster of pool pn's app, nil when none is streamed.
func (s *scene) tenantOf(pn tenant.PoolNames) *reader { return s.apps[pn.Names] }

var (
	dataVolumeGVK = schema.GroupVersionKind{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"}
	vmiGVK        = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachineInstance"}
	machineGVK    = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}
	mhcGVK        = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineHealthCheck"}
)

// poolKinds are dumped by the machines collector, in the order a reader follows a pool down.
var poolKinds = slices.Concat([]schema.GroupVersionKind{
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSet"},
	machineGVK, mhcGVK},
	bootstrapConfigKinds(),
	[]schema.GroupVersionKind{tenant.KubevirtMachineGVK,
		{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"},
		vmiGVK,
		{Version: "v1", Kind: "Pod"},
	})

// bootstrapConfigKinds are the per-Machine bootstrap config kinds of every known OS family.
func bootstrapConfigKinds() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, f := range osfamily.All() {
		out = append(out, f.BootstrapConfig)
	}
	return out
}

// mine keeps the objects of list (of the management cluster) that belong to pool pn. The whole
// list is learned first, so an object whose owner is listed with it is attributed through it.
func (s *scene) mine(pn tenant.PoolNames, list []unstructured.Unstructured) []unstructured.Unstructured {
	for i := range list {
		s.pools.learn(Management, list[i].GetKind(), &list[i], false)
	}
	var out []unstructured.Unstructured
	for i := range list {
		if p, ok := s.pools.of(Management, list[i].GetKind(), &list[i]); ok && p == pn {
			out = append(out, list[i])
		}
	}
	return out
}

// poolEvents writes the events of the pool's objects in both clusters, oldest first, as lines
// a person reads: the Warning that explains a failure is usually here.
func (s *scene) poolEvents(pn tenant.PoolNames) collector {
	return collector{name: "events", scope: "pool " + pn.Pool, share: 0.04, bytes: 1 << 20,
		run: func(ctx context.Context, w *work) error {
			var lines []string
			for _, r := range []*reader{s.mgmt, s.tenantOf(pn)} {
				if r == nil {
					continue
				}
				ns := s.namespace
				if r != s.mgmt {
					ns = ""
				}
				list, err := r.c.Kube.CoreV1().Events(ns).List(ctx, listOptions(""))
				if err != nil {
					return fmt.Errorf("listing events of cluster %s: %w", r.name, err)
				}
				for i := range list.Items {
					e := &list.Items[i]
					cl := Management
					if r != s.mgmt {
						cl = r.name
					}
					if p, ok := s.pools.ofRef(cl, e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.InvolvedObject.UID); !ok || p != pn {
						continue
					}
					w.items++
					lines = append(lines, fmt.Sprintf("%s %-7s %-10s %-24s %s/%s: %s (x%d, %s)", stamp(join.EventTime(e)), e.Type, r.name,
						e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message, max(e.Count, 1),
						firstNonEmpty(e.ReportingController, e.Source.Component)))
				}
			}
			sort.Strings(lines)
			if len(lines) == 0 {
				w.note("no event names an object of pool %s", pn.Pool)
				return nil
			}
			return w.file(poolDir(pn)+"/events.txt", []byte(strings.Join(lines, "\n")+"\n"), 1<<20)
		}}
}

// diskImport writes the pool's DataVolumes and the logs of their importers, current and previous.
func (s *scene) diskImport(pn tenant.PoolNames) collector {
	return collector{name: "disk-import", scope: "pool " + pn.Pool, share: 0.12, bytes: 4 << 20, count: 6,
		run: func(ctx context.Context, w *work) error {
			dvs, err := s.mgmt.list(ctx, dataVolumeGVK, s.namespace)
			if err != nil {
				return err
			}
			dvs = s.mine(pn, dvs)
			w.items += len(dvs)
			var sum []string
			var dump []map[string]any
			for i := range dvs {
				dv := &dvs[i]
				phase, _, _ := unstructured.NestedString(dv.Object, "status", "phase")
				progress, _, _ := unstructured.NestedString(dv.Object, "status", "progress")
				restarts, _, _ := unstructured.NestedInt64(dv.Object, "status", "restartCount")
				sum = append(sum, fmt.Sprintf("DataVolume %s: phase %s, progress %s, importer restarts %d", dv.GetName(), orNone(phase), orNone(progress), restarts))
				for _, c := range stateOf(dv).conds {
					sum = append(sum, fmt.Sprintf("  condition %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
				}
				dump = append(dump, clean(dv))
			}
			if len(dvs) == 0 {
				w.note("pool %s has no DataVolume yet", pn.Pool)
			} else if err := w.yaml(poolDir(pn)+"/datavolumes.yaml", dump, 1<<20); err != nil {
				return err
			}
			pods, err := s.mgmt.pods(ctx, s.namespace)
			if err != nil {
				return err
			}
			logs := 0
			for i := range pods {
				p := &pods[i]
				if !strings.HasPrefix(p.Name, tenant.ImporterPrefix) {
					continue
				}
				if pp, ok := s.pools.of(Management, "Pod", p); !ok || pp != pn {
					continue
				}
				sum = append(sum, fmt.Sprintf("importer Pod %s: phase %s%s", p.Name, p.Status.Phase, restartsOf(p)))
				n, err := s.podLogs(ctx, w, s.mgmt, p, poolDir(pn)+"/logs", &logs, 6)
				if err != nil {
					w.note("%v", err)
				}
				w.items += n
			}
			if len(sum) > 0 {
				return w.file(poolDir(pn)+"/datavolumes.txt", []byte(strings.Join(sum, "\n")+"\n"), 256<<10)
			}
			return nil
		}}
}

// podLogs reads every container's current log of p and the previous one of each container
// that restarted, counting against *count up to most.
func (s *scene) podLogs(ctx context.Context, w *work, r *reader, p *corev1.Pod, dir string, count *int, most int) (int, error) {
	var errs []error
	read := 0
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		for _, prev := range []bool{false, true} {
			if prev && cs.RestartCount == 0 {
				continue
			}
			if !prev && cs.State.Waiting != nil && cs.LastTerminationState.Terminated == nil && cs.RestartCount == 0 {
				continue // never ran: no log
			}
			if *count >= most {
				w.truncated = append(w.truncated, fmt.Sprintf("more than %d logs; the rest were not read", most))
				return read, errors.Join(errs...)
			}
			*count++
			suffix := ".log"
			if prev {
				suffix = ".previous.log"
			}
			rel := fmt.Sprintf("%s/%s/%s%s", dir, p.Name, cs.Name, suffix)
			n, cut, err := r.readLog(ctx, w.a, rel, p.Namespace, p.Name, cs.Name, prev, w.limits.LogBytes)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			w.record(rel, n, cut)
			read++
		}
	}
	return read, errors.Join(errs...)
}

func restartsOf(p *corev1.Pod) string {
	var parts []string
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if cs.RestartCount > 0 {
			parts = append(parts, fmt.Sprintf("%s restarted %d times", cs.Name, cs.RestartCount))
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// machines dumps the pool's Cluster API, bootstrap, CAPK and KubeVirt objects and its launcher
// Pods, and writes one summary line per Machine and MachineHealthCheck.
func (s *scene) machines(pn tenant.PoolNames) collector {
	return collector{name: "machines", scope: "pool " + pn.Pool, share: 0.08, bytes: 4 << 20,
		run: func(ctx context.Context, w *work) error {
			var sum []string
			for _, l := range s.mgmt.listMany(ctx, poolKinds, s.namespace) {
				gvk, list, err := l.gvk, l.items, l.err
				if errors.Is(err, ErrNotServed) {
					w.note("%v", err)
					continue
				}
				if err != nil {
					return err
				}
				list = s.mine(pn, list)
				if len(list) == 0 {
					continue
				}
				w.items += len(list)
				dump := make([]map[string]any, 0, len(list))
				for i := range list {
					dump = append(dump, clean(&list[i]))
					sum = append(sum, summaryLine(&list[i]))
				}
				if err := w.yaml(fmt.Sprintf("%s/resources/%s.yaml", poolDir(pn), kindFile(gvk)), dump, 1<<20); err != nil {
					return err
				}
			}
			if len(sum) == 0 {
				w.note("pool %s has no Cluster API object yet", pn.Pool)
				return nil
			}
			return w.file(poolDir(pn)+"/machines.txt", []byte(strings.Join(sum, "\n")+"\n"), 256<<10)
		}}
}

// summaryLine is one object's phase, tracked fields and non-True conditions on one line.
func summaryLine(u *unstructured.Unstructured) string {
	st := stateOf(u)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: phase %s", u.GetKind(), u.GetName(), orNone(st.phase))
	keys := make([]string, 0, len(st.fields))
	for k := range st.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, ", %s %s", k, st.fields[k])
	}
	var conds []Condition
	for _, c := range st.conds {
		if c.Status != "True" || c.Reason != "" && strings.Contains(strings.ToLower(c.Reason), "fail") {
			conds = append(conds, c)
		}
	}
	sortConds(conds)
	for _, c := range conds {
		fmt.Fprintf(&b, "; %s=%s", c.Type, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(&b, " %s", c.Reason)
		}
		if c.Message != "" {
			fmt.Fprintf(&b, ": %s", c.Message)
		}
	}
	return b.String()
}
