package diag

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// identity puts the pool's VMIs beside the tenant's Nodes: a Node must carry its VMI's name, the
// providerID kubevirt://<vmi> and the Cluster API annotations, and its Machine must point at
// it. Every mismatch gets a line saying which side is wrong; the pool's Nodes are dumped too.
func (s *scene) identity(pn tenant.PoolNames) collector {
	return collector{name: "identity", scope: "pool " + pn.Pool, share: 0.06, bytes: 1 << 20,
		run: func(ctx context.Context, w *work) error {
			vmis, err := s.mgmt.list(ctx, vmiGVK, s.namespace)
			if errors.Is(err, ErrNotServed) {
				w.note("%v: Nodes are listed without their VMIs", err)
			} else if err != nil {
				return err
			}
			vmis = s.mine(pn, vmis)
			machines, err := s.mgmt.list(ctx, machineGVK, s.namespace)
			if err != nil {
				w.note("%v", err)
			}
			machines = s.mine(pn, machines)
			tc := s.tenantOf(pn)
			if tc == nil {
				w.note("no tenant cluster: Nodes cannot be read")
				return w.file(poolDir(pn)+"/identity.txt", []byte(identityReport(pn, vmis, machines, nil, nil)), 256<<10)
			}
			list, err := tc.c.Kube.CoreV1().Nodes().List(ctx, listOptions(""))
			if err != nil {
				return fmt.Errorf("listing Nodes of the tenant cluster %s: %w", tc.name, err)
			}
			w.items = len(vmis) + len(list.Items)
			owner := func(n *corev1.Node) (tenant.PoolNames, bool) { return s.pools.of(tc.name, "Node", n) }
			if err := w.file(poolDir(pn)+"/identity.txt", []byte(identityReport(pn, vmis, machines, list.Items, owner)), 256<<10); err != nil {
				return err
			}
			var dump []map[string]any
			for i := range list.Items {
				n := &list.Items[i]
				if p, ok := owner(n); ok && p != pn {
					continue // another pool's Node
				}
				obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n)
				if err != nil {
					return err
				}
				u := &unstructured.Unstructured{Object: obj}
				u.SetKind("Node")
				u.SetAPIVersion("v1")
				dump = append(dump, clean(u))
			}
			if len(dump) == 0 {
				return nil
			}
			return w.yaml(poolDir(pn)+"/nodes.yaml", dump, 1<<20)
		}}
}

// identityReport puts the pool's VMIs beside the tenant's Nodes. owner attributes a Node to its
// pool (diag.pools); nil when the tenant's Nodes could not be read.
func identityReport(pn tenant.PoolNames, vmis, machines []unstructured.Unstructured, nodes []corev1.Node, owner func(*corev1.Node) (tenant.PoolNames, bool)) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pool %s (%s): %d VMI(s), %d Machine(s)\n", pn.Pool, pn.MachineDeployment(), len(vmis), len(machines))
	index := indexNodes(nodes)
	seen := map[string]bool{}
	for _, v := range vmis {
		name := v.GetName()
		phase, _, _ := unstructured.NestedString(v.Object, "status", "phase")
		fmt.Fprintf(&b, "VMI %s (phase %s):", name, orNone(phase))
		n, how, ok := index.nodeOf(&v)
		switch {
		case owner == nil:
			b.WriteString(" tenant Nodes not readable\n")
			continue
		case !ok:
			b.WriteString(" MISMATCH no tenant Node carries this name, its providerID or its address\n")
			continue
		}
		seen[n.Name] = true
		writeVMINode(&b, name, n, how)
	}
	for _, m := range machines {
		ref, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
		fmt.Fprintf(&b, "Machine %s (phase %s): nodeRef %s\n", m.GetName(), orNone(phase), orNone(ref))
	}
	for i := range nodes {
		n := &nodes[i]
		if seen[n.Name] {
			continue
		}
		p, attributed := owner(n)
		switch {
		case attributed && p != pn:
			continue // a Node of another pool
		case attributed:
			fmt.Fprintf(&b, "Node %s: MISMATCH it is this pool's (by its Machine, providerID or address), but no VMI of this pool carries its name, providerID or address (providerID %q, hostname label %q); %s\n",
				n.Name, n.Spec.ProviderID, n.Labels["kubernetes.io/hostname"], nodeCondition(n))
		default:
			fmt.Fprintf(&b, "Node %s: tied to no VMI of any pool: no Machine annotation, providerID or address of one (providerID %q, hostname label %q); %s\n",
				n.Name, n.Spec.ProviderID, n.Labels["kubernetes.io/hostname"], nodeCondition(n))
		}
	}
	return b.String()
}

// nodeIndex holds the tenant's Nodes by name, by providerID and by address.
type nodeIndex struct {
	byName, byProviderID, byIP map[string]*corev1.Node
}

// indexNodes indexes nodes by name, providerID (when set) and each of their addresses.
func indexNodes(nodes []corev1.Node) nodeIndex {
	x := nodeIndex{byName: map[string]*corev1.Node{}, byProviderID: map[string]*corev1.Node{}, byIP: map[string]*corev1.Node{}}
	for i := range nodes {
		x.byName[nodes[i].Name] = &nodes[i]
		if id := nodes[i].Spec.ProviderID; id != "" {
			x.byProviderID[id] = &nodes[i]
		}
		for _, ip := range nodeIPs(nodes[i].Status.Addresses) {
			x.byIP[ip] = &nodes[i]
		}
	}
	return x
}

// nodeOf is the tenant Node of VMI v and how it was found: named like it, else by its
// providerID, else by an address of the VMI on a Node with no other providerID.
func (x nodeIndex) nodeOf(v *unstructured.Unstructured) (*corev1.Node, string, bool) {
	name := v.GetName()
	n, ok := x.byName[name]
	how := "named like it"
	if !ok {
		// A worker whose kubelet set --provider-id under a name of its own (Kairos: metal-<id>).
		n, ok = x.byProviderID[tenant.ProviderID(name)]
		how = "by its providerID"
	}
	if !ok {
		// A worker named otherwise before its providerID came: its InternalIP is the VMI's.
		for _, ip := range unstructuredIPs("VirtualMachineInstance", v) {
			if n, ok = x.byIP[ip]; ok && (n.Spec.ProviderID == "" || n.Spec.ProviderID == tenant.ProviderID(name)) {
				how = "by its address " + ip
				break
			}
			ok = false
		}
	}
	return n, how, ok
}

// writeVMINode writes that Node n (found how) exists for VMI name, whether its providerID is
// the VMI's, which Cluster API annotations it lacks and its Ready condition.
func writeVMINode(b *strings.Builder, name string, n *corev1.Node, how string) {
	fmt.Fprintf(b, " Node %s (%s) exists", n.Name, how)
	if want := tenant.ProviderID(name); n.Spec.ProviderID != want {
		fmt.Fprintf(b, "; MISMATCH providerID %q, want %q", n.Spec.ProviderID, want)
	} else {
		b.WriteString("; providerID ok")
	}
	for _, a := range []string{tenant.AnnotationClusterName, tenant.AnnotationClusterNamespace, tenant.AnnotationMachine} {
		if n.Annotations[a] == "" {
			fmt.Fprintf(b, "; annotation %s missing", a)
		}
	}
	fmt.Fprintf(b, "; %s\n", nodeCondition(n))
}

func nodeCondition(n *corev1.Node) string {
	ready := "Ready unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = fmt.Sprintf("Ready=%s", c.Status)
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				ready += " (" + c.Reason + ": " + c.Message + ")"
			}
		}
	}
	var taints []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	s := ready
	if len(taints) > 0 {
		s += ", taints " + strings.Join(taints, ",")
	}
	if n.Spec.Unschedulable {
		s += ", cordoned"
	}
	return s + ", kubelet " + orNone(n.Status.NodeInfo.KubeletVersion)
}

// consoles reads the serial console of every launcher of the pool that the stream did not
// follow (no recorder, or a launcher gone before it could), current and previous.
func (s *scene) consoles(pn tenant.PoolNames) collector {
	return collector{name: "consoles", scope: "pool " + pn.Pool, share: 0.1, bytes: 2 << 20, count: 6,
		run: func(ctx context.Context, w *work) error {
			streamed := map[string]bool{}
			if s.streamed != nil {
				for _, r := range s.streamed() {
					if r.Source == serialconsole.SourceLog {
						streamed[fmt.Sprintf("%s/%d", r.PodUID, r.Restart)] = true
					}
				}
			}
			pods, err := s.mgmt.pods(ctx, s.namespace)
			if err != nil {
				return err
			}
			read, launchers, waiting := 0, 0, 0
			for i := range pods {
				p := &pods[i]
				if pp, ok := s.pools.of(Management, "Pod", p); !ok || pp != pn || !hasConsole(p) {
					continue
				}
				_, ok, restart := consoleStatus(p)
				launchers++
				if !ok && restart == 0 {
					waiting++
				}
				for _, prev := range []bool{false, true} {
					n := restart
					if prev {
						n--
					}
					if n < 0 || (!prev && !ok) || streamed[fmt.Sprintf("%s/%d", p.UID, n)] {
						continue
					}
					if read >= 6 {
						w.truncated = append(w.truncated, "more than 6 consoles to read; the rest were not")
						return nil
					}
					read++
					if err := s.readConsole(ctx, w, pn, p, n, prev); err != nil {
						w.note("%v", err)
					}
				}
			}
			switch {
			case launchers == 0:
				w.note("pool %s has no launcher Pod with a %s container", pn.Pool, ConsoleContainer)
			case waiting > 0:
				w.note("%d of %d launcher(s) of pool %s never started their %s container: no console to read", waiting, launchers, pn.Pool, ConsoleContainer)
			case read == 0:
				w.note("every console of pool %s was streamed; see its consoles/ folder", pn.Pool)
			}
			return nil
		}}
}

// readConsole reads one console container log once, with the header a streamed file has.
func (s *scene) readConsole(ctx context.Context, w *work, pn tenant.PoolNames, p *corev1.Pod, restart int32, previous bool) error {
	vmi := vmiOfLauncher(p)
	rec := &ConsoleRecord{Pool: pn.Pool, VMI: vmi, VMIUID: tenant.LauncherVMIUID(p.Labels), Pod: p.Name, PodUID: string(p.UID),
		Restart: restart, Node: p.Spec.NodeName, ReadStart: s.now(),
		Path: fmt.Sprintf("%s/consoles/%s/%s-%d.log", poolDir(pn), vmi, p.Name, restart)}
	if st, ok, _ := consoleStatus(p); ok && !previous {
		rec.LauncherStart = st
	}
	if rec.VMIUID == "" {
		rec.VMIUID = "unknown (the launcher Pod has no kubevirt.io/created-by label)"
	}
	body, cut, err := s.mgmt.logBytes(ctx, p.Namespace, p.Name, ConsoleContainer, previous, w.limits.ConsoleBytes)
	if err != nil {
		return err
	}
	rec.ReadEnd = s.now()
	rec.EndReason = "read once by the on-failure collector"
	if previous {
		rec.EndReason = "previous instance, read once by the on-failure collector"
	}
	header, off := consoleHeader(p.Namespace, rec)
	out := append(header, body...)
	copy(out[off:], readEndField(rec.ReadEnd, rec.EndReason))
	if cut {
		out = append(out, []byte(fmt.Sprintf("# cut at its byte bound of %d bytes\n", w.limits.ConsoleBytes))...)
	}
	more, err := w.a.WriteFile(rec.Path, out, 0)
	if err != nil {
		return err
	}
	w.record(rec.Path, int64(len(out)), cut || more)
	return nil
}
