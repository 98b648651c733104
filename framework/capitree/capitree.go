// Package capitree describes a tenant cluster's Cluster API objects as `clusterctl describe
// cluster` shows them, so the evidence reads the way Cluster API users read a cluster's health.
//
// The object tree is Cluster API's own: sigs.k8s.io/cluster-api/cmd/clusterctl/client/tree
// (Discovery, ObjectTree, its condition and grouping helpers), v1.13.6. Its printer lives in
// sigs.k8s.io/cluster-api/internal/util/tree (PrintObjectTree), which an outside module cannot
// import; Print follows internal/util/tree/tree.go at v1.13.6 row for row (columns, tree
// prefixes, the condition each kind shows, group rows, messages wrapped at 100 characters), as
// plain text without colours.
package capitree

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gobuffalo/flect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/tree"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options are the flags of `clusterctl describe cluster` the harness uses.
type Options struct {
	// ShowConditions is --show-conditions: comma-separated kind or kind/name ("all" for all).
	ShowConditions string
	// Echo is --echo: show a Machine's infrastructure and bootstrap objects even when Ready.
	Echo bool
	// NoGrouping is --grouping=false: one row per Machine, never "2 Machines...".
	NoGrouping bool
	// Now is the clock the SINCE column counts from; nil: time.Now.
	Now func() time.Time
}

// Command is the clusterctl command line that shows the same as Describe with o.
func Command(namespace, name string, o Options) string {
	cmd := fmt.Sprintf("clusterctl describe cluster %s -n %s", name, namespace)
	if o.ShowConditions != "" {
		cmd += " --show-conditions " + o.ShowConditions
	}
	if o.Echo {
		cmd += " --echo"
	}
	if o.NoGrouping {
		cmd += " --grouping=false"
	}
	return cmd
}

// Describe discovers Cluster namespace/name's object tree through c (Cluster API's
// tree.Discovery) and prints it as clusterctl does.
func Describe(ctx context.Context, c client.Client, namespace, name string, o Options) (string, error) {
	t, err := tree.Discovery(ctx, c, namespace, name, tree.DiscoverOptions{
		ShowOtherConditions: o.ShowConditions, Echo: o.Echo, Grouping: !o.NoGrouping, AddTemplateVirtualNode: true,
	})
	if err != nil {
		return "", fmt.Errorf("the Cluster API object tree of Cluster %s/%s: %w", namespace, name, err)
	}
	var b strings.Builder
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	if err := Print(&b, t, now()); err != nil {
		return "", err
	}
	return b.String(), nil
}

const (
	firstElemPrefix = `├─`
	lastElemPrefix  = `└─`
	indent          = "  "
	pipe            = `│ `
)

// Print writes t as clusterctl's PrintObjectTree does, the SINCE column counted to now.
func Print(w io.Writer, t *tree.ObjectTree, now time.Time) error {
	p := &printer{t: t, now: now}
	p.rows = append(p.rows, []string{"NAME", "REPLICAS", "AVAILABLE", "READY", "UP TO DATE", "STATUS", "REASON", "SINCE", "MESSAGE"})
	p.last = p.lastObject()
	p.addObjectRow("", t.GetRoot())
	_, err := io.WriteString(w, render(p.rows))
	return err
}

type printer struct {
	t    *tree.ObjectTree
	now  time.Time
	rows [][]string
	last client.Object
}

// render lays the rows out as clusterctl's tablewriter does: each column as wide as its widest
// cell plus two spaces (the header plus one), left aligned, no borders.
func render(rows [][]string) string {
	widths := make([]int, len(rows[0]))
	for i, r := range rows {
		pad := 2
		if i == 0 {
			pad = 1
		}
		for j, cell := range r {
			widths[j] = max(widths[j], len([]rune(cell))+pad)
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for j, cell := range r {
			line.WriteString(cell)
			line.WriteString(strings.Repeat(" ", widths[j]-len([]rune(cell))))
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteString("\n")
	}
	return b.String()
}

func (p *printer) addObjectRow(prefix string, obj client.Object) {
	rd := p.newRowDescriptor(obj)
	if tree.IsGroupObject(obj) {
		items := strings.Split(tree.GetGroupItems(obj), tree.GroupItemsSeparator)
		if len(items) <= 2 {
			rd.message = fmt.Sprintf("See %s", strings.Join(items, tree.GroupItemsSeparator))
		} else {
			rd.message = fmt.Sprintf("See %s, ...", strings.Join(items[:2], tree.GroupItemsSeparator))
		}
	}
	name := rowName(obj)
	if tree.IsShowConditionsObject(obj) {
		rd.status, rd.reason, rd.age, rd.message = "", "", "", ""
	}
	msg := strings.Split(rd.message, "\n")
	p.rows = append(p.rows, []string{prefix + name, rd.replicas, rd.available, rd.ready, rd.upToDate, rd.status, rd.reason, rd.age, msg[0]})
	multiline := p.multiLinePrefix(obj)
	for _, m := range msg[1:] {
		p.rows = append(p.rows, []string{multiline, "", "", "", "", "", "", "", m})
	}
	p.addOtherConditions(prefix, obj)
	children := orderChildren(p.t.GetObjectsByParent(obj.GetUID()))
	for i, child := range children {
		p.addObjectRow(childPrefix(prefix, i, len(children)), child)
	}
}

// negativePolarity are the conditions that are good when False (upstream's list).
var negativePolarity = map[string]bool{
	clusterv1.PausedCondition: true, clusterv1.DeletingCondition: true, clusterv1.RollingOutCondition: true,
	clusterv1.ScalingUpCondition: true, clusterv1.ScalingDownCondition: true, clusterv1.MachineUpdatingCondition: true,
	clusterv1.RemediatingCondition: true,
}

func (p *printer) addOtherConditions(prefix string, obj client.Object) {
	filter := tree.ShowConditionsFilter(obj)
	if filter == tree.ShownNoConditions {
		return
	}
	filler := strings.Repeat(" ", 10)
	childrenPipe := indent
	if p.t.IsObjectWithChild(obj.GetUID()) {
		childrenPipe = pipe
	}
	conditions := tree.GetConditions(obj)
	show := conditions
	if filter == tree.ShowNonZeroConditions {
		show = nil
		for _, c := range conditions {
			if c.Type != clusterv1.AvailableCondition && c.Type != clusterv1.ReadyCondition && conditionIsZero(c, !negativePolarity[c.Type]) {
				continue
			}
			show = append(show, c)
		}
	}
	for i, c := range show {
		cp := childPrefix(prefix+childrenPipe+filler, i, len(show))
		status, age, reason, message := p.conditionInfo(c)
		msg := strings.Split(message, "\n")
		p.rows = append(p.rows, []string{cp + c.Type, "", "", "", "", status, reason, age, msg[0]})
		for _, m := range msg[1:] {
			p.rows = append(p.rows, []string{multilineConditionPrefix(cp), "", "", "", "", "", "", "", m})
		}
	}
}

func orderChildren(children []client.Object) []client.Object {
	sort.Slice(children, func(i, j int) bool {
		if tree.GetZOrder(children[i]) == tree.GetZOrder(children[j]) {
			return rowName(children[i]) < rowName(children[j])
		}
		return tree.GetZOrder(children[i]) > tree.GetZOrder(children[j])
	})
	return children
}

// childPrefix is the tree prefix of a child row (upstream getChildPrefix).
func childPrefix(current string, i, n int) string {
	next := strings.ReplaceAll(current, firstElemPrefix, pipe)
	next = strings.ReplaceAll(next, lastElemPrefix, strings.Repeat(" ", len([]rune(lastElemPrefix))))
	if i < n-1 {
		return next + firstElemPrefix
	}
	return next + lastElemPrefix
}

// multilineConditionPrefix continues a condition row (upstream getMultilineConditionPrefix).
func multilineConditionPrefix(current string) string {
	if strings.HasSuffix(current, firstElemPrefix) {
		return strings.TrimSuffix(current, firstElemPrefix) + pipe
	}
	if strings.HasSuffix(current, lastElemPrefix) {
		return strings.TrimSuffix(current, lastElemPrefix)
	}
	return "?"
}

// multiLinePrefix continues an object row (upstream getRootMultiLineObjectPrefix).
func (p *printer) multiLinePrefix(obj client.Object) string {
	if p.last != nil && p.last.GetUID() == obj.GetUID() {
		return ""
	}
	var prefix string
	if len(p.t.GetObjectsByParent(obj.GetUID())) > 0 {
		prefix = pipe
	}
	previous := obj.GetUID()
	parent := p.t.GetParent(obj.GetUID())
	for parent != nil {
		if previous == parent.GetUID() {
			break
		}
		siblings := orderChildren(p.t.GetObjectsByParent(parent.GetUID()))
		isLast := len(siblings) > 0 && siblings[len(siblings)-1].GetUID() == previous
		if p.t.IsObjectWithChild(parent.GetUID()) && !isLast {
			prefix = pipe + prefix
		} else {
			prefix = indent + prefix
		}
		previous = parent.GetUID()
		parent = p.t.GetParent(parent.GetUID())
	}
	return prefix
}

// lastObject is the object printed last (upstream getLastObjectInTree).
func (p *printer) lastObject() client.Object {
	var last client.Object
	var walk func(client.Object)
	walk = func(o client.Object) {
		last = o
		for _, c := range orderChildren(p.t.GetObjectsByParent(o.GetUID())) {
			walk(c)
		}
	}
	walk(p.t.GetRoot())
	return last
}

// rowName is an object's name in the tree (upstream getRowName): "2 Machines...", a virtual
// node's name, "Kind/name", with its meta name ("ControlPlane - KamajiControlPlane/x") and a
// deletion mark.
func rowName(obj client.Object) string {
	if tree.IsGroupObject(obj) {
		items := strings.Split(tree.GetGroupItems(obj), tree.GroupItemsSeparator)
		kind := flect.Pluralize(strings.TrimSuffix(obj.GetObjectKind().GroupVersionKind().Kind, "Group"))
		return fmt.Sprintf("%d %s...", len(items), kind)
	}
	if tree.IsVirtualObject(obj) {
		if meta := tree.GetMetaName(obj); meta != "" {
			return meta
		}
		return obj.GetName()
	}
	name := fmt.Sprintf("%s/%s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	if meta := tree.GetMetaName(obj); meta != "" {
		name = fmt.Sprintf("%s - %s", meta, name)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		name = "!! DELETED !! " + name
	}
	return name
}

type rowDescriptor struct {
	age, replicas, available, ready, upToDate, status, reason, message string
}

// newRowDescriptor is what a row shows for obj (upstream newRowDescriptor): replica counters,
// and the condition that speaks for the kind (Available for a Cluster, a MachineDeployment and
// a control plane; Ready for a Machine and everything else).
func (p *printer) newRowDescriptor(obj client.Object) rowDescriptor {
	v := rowDescriptor{}
	show := func(c *metav1.Condition) {
		if c != nil {
			v.status, v.age, v.reason, v.message = p.conditionInfo(*c)
		}
	}
	switch o := obj.(type) {
	case *clusterv1.Cluster:
		cp := o.Status.ControlPlane
		if cp == nil {
			cp = &clusterv1.ClusterControlPlaneStatus{}
		}
		w := o.Status.Workers
		if w == nil {
			w = &clusterv1.WorkersStatus{}
		}
		if cp.DesiredReplicas != nil || w.DesiredReplicas != nil || cp.Replicas != nil || w.Replicas != nil {
			v.replicas = fmt.Sprintf("%d/%d", ptr.Deref(cp.Replicas, 0)+ptr.Deref(w.Replicas, 0), ptr.Deref(cp.DesiredReplicas, 0)+ptr.Deref(w.DesiredReplicas, 0))
		}
		if cp.AvailableReplicas != nil || w.AvailableReplicas != nil {
			v.available = fmt.Sprint(ptr.Deref(cp.AvailableReplicas, 0) + ptr.Deref(w.AvailableReplicas, 0))
		}
		if cp.ReadyReplicas != nil || w.ReadyReplicas != nil {
			v.ready = fmt.Sprint(ptr.Deref(cp.ReadyReplicas, 0) + ptr.Deref(w.ReadyReplicas, 0))
		}
		if cp.UpToDateReplicas != nil || w.UpToDateReplicas != nil {
			v.upToDate = fmt.Sprint(ptr.Deref(cp.UpToDateReplicas, 0) + ptr.Deref(w.UpToDateReplicas, 0))
		}
		show(tree.GetAvailableCondition(o))
	case *clusterv1.MachineDeployment:
		if o.Spec.Replicas != nil {
			v.replicas = fmt.Sprintf("%d/%d", ptr.Deref(o.Status.Replicas, 0), *o.Spec.Replicas)
		}
		v.available, v.ready, v.upToDate = counter(o.Status.AvailableReplicas), counter(o.Status.ReadyReplicas), counter(o.Status.UpToDateReplicas)
		show(tree.GetAvailableCondition(o))
	case *clusterv1.MachineSet:
		if o.Spec.Replicas != nil {
			v.replicas = fmt.Sprintf("%d/%d", ptr.Deref(o.Status.Replicas, 0), *o.Spec.Replicas)
		}
		v.available, v.ready, v.upToDate = counter(o.Status.AvailableReplicas), counter(o.Status.ReadyReplicas), counter(o.Status.UpToDateReplicas)
	case *clusterv1.Machine:
		v.replicas, v.available, v.ready, v.upToDate = "1", "0", "0", "0"
		if c := tree.GetAvailableCondition(o); c != nil && c.Status == metav1.ConditionTrue {
			v.available = "1"
		}
		if c := tree.GetReadyCondition(o); c != nil {
			show(c)
			if c.Status == metav1.ConditionTrue {
				v.ready = "1"
			}
		}
		if c := tree.GetMachineUpToDateCondition(o); c != nil && c.Status == metav1.ConditionTrue {
			v.upToDate = "1"
		}
	case *unstructured.Unstructured:
		show(tree.GetReadyCondition(o))
		if tree.GetObjectContract(o) == "ControlPlane" {
			if c := tree.GetAvailableCondition(o); c != nil {
				show(c)
			}
			// The control plane contract's replica fields (upstream reads them through
			// internal/contract: spec.replicas, status.replicas/readyReplicas/availableReplicas,
			// status.upToDateReplicas, status.updatedReplicas before contract v1beta2).
			current, okc := nestedInt(o, "status", "replicas")
			desired, okd := nestedInt(o, "spec", "replicas")
			if okc && okd {
				v.replicas = fmt.Sprintf("%d/%d", current, desired)
			}
			if n, ok := nestedInt(o, "status", "availableReplicas"); ok {
				v.available = fmt.Sprint(n)
			}
			if n, ok := nestedInt(o, "status", "readyReplicas"); ok {
				v.ready = fmt.Sprint(n)
			}
			upToDate := "upToDateReplicas"
			if tree.GetObjectContractVersion(o) == "v1beta1" {
				upToDate = "updatedReplicas"
			}
			if n, ok := nestedInt(o, "status", upToDate); ok {
				v.upToDate = fmt.Sprint(n)
			}
		}
	case *tree.NodeObject:
		if tree.IsGroupObject(o) {
			v.ready = fmt.Sprint(tree.GetGroupItemsReadyCounter(o))
			v.available = fmt.Sprint(tree.GetGroupItemsAvailableCounter(o))
			v.upToDate = fmt.Sprint(tree.GetGroupItemsUpToDateCounter(o))
		}
		show(tree.GetReadyCondition(o))
	}
	return v
}

func counter(n *int32) string {
	if n == nil {
		return ""
	}
	return fmt.Sprint(*n)
}

func nestedInt(o *unstructured.Unstructured, path ...string) (int64, bool) {
	n, ok, err := unstructured.NestedInt64(o.Object, path...)
	return n, ok && err == nil
}

func conditionIsZero(c metav1.Condition, positive bool) bool {
	switch c.Status {
	case metav1.ConditionFalse:
		if positive {
			return false
		}
	case metav1.ConditionUnknown:
		return false
	case metav1.ConditionTrue:
		if !positive {
			return false
		}
	}
	return c.Message == ""
}

func (p *printer) conditionInfo(c metav1.Condition) (status, age, reason, message string) {
	return string(c.Status), duration.HumanDuration(p.now.Sub(c.LastTransitionTime.Time)), c.Reason, formatParagraph(c.Message, 100)
}

var spaces = regexp.MustCompile(`[\s]+`)

// formatParagraph wraps text at maxWidth, keeping its line breaks (upstream formatParagraph).
func formatParagraph(text string, maxWidth int) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		tmp := ""
		for _, c := range l {
			if c != ' ' {
				break
			}
			tmp += " "
		}
		ind := tmp
		if strings.HasPrefix(strings.TrimSpace(l), "* ") {
			ind += "  "
		}
		for _, w := range spaces.Split(l, -1) {
			if len(tmp)+len(w) < maxWidth {
				if strings.TrimSpace(tmp) != "" {
					tmp += " "
				}
				tmp += w
				continue
			}
			lines = append(lines, tmp)
			tmp = ind + w
		}
		lines = append(lines, tmp)
	}
	return strings.Join(lines, "\n")
}
