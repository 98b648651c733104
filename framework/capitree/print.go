package capitree

import (
	"io"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/tree"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Tree drawing: a branch to an object that has siblings below it, to the last one, the line
// that carries on past a branch, and the blanks under a last branch.
const (
	branchMid  = "├─"
	branchLast = "└─"
	lineOn     = "│ "
	lineOff    = "  "
)

// conditionIndent is how far right of the drawing under an object the tree of its conditions
// starts (--show-conditions), as clusterctl v1.13.6 draws it.
const conditionIndent = 11

// Print writes t as clusterctl v1.13.6's describe cluster prints it, the SINCE column counted
// to now.
func Print(w io.Writer, t *tree.ObjectTree, now time.Time) error {
	d := &drawing{t: t, now: now}
	d.object(t.GetRoot(), "", "")
	_, err := io.WriteString(w, layout(d.rows))
	return err
}

// drawing collects the table rows of an object tree, top to bottom.
type drawing struct {
	t    *tree.ObjectTree
	now  time.Time
	rows []row
}

// object adds the rows of obj and everything under it. lead is the drawing in front of obj's
// branch, branch is branchMid, branchLast, or "" for the root.
func (d *drawing) object(obj client.Object, lead, branch string) {
	under := lead // what stands in front of anything drawn under obj
	switch branch {
	case branchMid:
		under += lineOn
	case branchLast:
		under += lineOff
	}
	kids := d.children(obj)
	// stem carries the line from obj down to its first child past obj's own extra rows.
	stem := " "
	if len(kids) > 0 {
		stem = "│"
	}
	r, msg := d.cells(obj)
	r[0] = lead + branch + rowName(obj)
	filter := tree.ShowConditionsFilter(obj)
	if filter != tree.ShownNoConditions {
		// The conditions get rows of their own; the object's row keeps only its counts.
		r[5], r[6], r[7], msg = "", "", "", ""
	}
	d.add(r, wrapMessage(msg, messageWidth), under+stem)
	if filter != tree.ShownNoConditions {
		d.conditions(obj, filter, under+stem+strings.Repeat(" ", conditionIndent))
	}
	for i, k := range kids {
		b := branchMid
		if i == len(kids)-1 {
			b = branchLast
		}
		d.object(k, under, b)
	}
}

// conditions adds a row per condition of obj the filter lets through, in the object's order,
// drawn as a tree of their own after lead.
func (d *drawing) conditions(obj client.Object, filter tree.ConditionFilterType, lead string) {
	var shown []metav1.Condition
	for _, c := range tree.GetConditions(obj) {
		if filter == tree.ShowAllConditions || notable(c) {
			shown = append(shown, c)
		}
	}
	for i, c := range shown {
		branch, stem := branchMid, "│"
		if i == len(shown)-1 {
			branch, stem = branchLast, " "
		}
		var r row
		r[0] = lead + branch + c.Type
		r[5], r[6], r[7] = string(c.Status), c.Reason, d.since(c)
		d.add(r, wrapMessage(c.Message, messageWidth), lead+stem)
	}
}

// add appends r with the first message line in its MESSAGE cell, then a row per further line,
// its NAME cell the drawing that continues the tree (cont).
func (d *drawing) add(r row, message []string, cont string) {
	if len(message) > 0 {
		r[len(r)-1] = message[0]
		message = message[1:]
	}
	d.rows = append(d.rows, r)
	for _, line := range message {
		var more row
		more[0], more[len(more)-1] = cont, line
		d.rows = append(d.rows, more)
	}
}

// children are the objects under obj in clusterctl's order: higher z-order first, then by the
// name their row shows.
func (d *drawing) children(obj client.Object) []client.Object {
	kids := d.t.GetObjectsByParent(obj.GetUID())
	sort.SliceStable(kids, func(i, j int) bool {
		if zi, zj := tree.GetZOrder(kids[i]), tree.GetZOrder(kids[j]); zi != zj {
			return zi > zj
		}
		return rowName(kids[i]) < rowName(kids[j])
	})
	return kids
}

// since is the SINCE cell of c: how long ago it last changed, blank when that is unknown.
func (d *drawing) since(c metav1.Condition) string {
	if c.LastTransitionTime.IsZero() {
		return ""
	}
	return duration.HumanDuration(d.now.Sub(c.LastTransitionTime.Time))
}
