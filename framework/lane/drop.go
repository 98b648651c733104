package lane

import (
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// A lane that extends another may drop a phase it inherits, one its suites never enter (the
// sim lane's refusals, in a lane that runs only a suite of its own):
//
//	budget:
//	  phases:
//	    - name: refusals
//	      drop: true
//
// The phase is gone from the budget; a suite that needs it is refused by name, as for any
// phase the lane lacks.

// dropped are the phases lane document own (its extends key removed) drops, taken out of it
// so that the merge never sees them; a drop that is not true is an error at its line.
func dropped(file string, own *yaml.Node) ([]*yaml.Node, error) {
	phases := phasesOf(own)
	if phases == nil {
		return nil, nil
	}
	var out []*yaml.Node
	kept := phases.Content[:0:0]
	for _, p := range phases.Content {
		d := -1
		if p.Kind == yaml.MappingNode {
			d = keyIndex(p, "drop")
		}
		if d < 0 {
			kept = append(kept, p)
			continue
		}
		v := p.Content[d+1]
		if v.Value != "true" || len(p.Content) != 4 || keyIndex(p, "name") < 0 {
			return nil, Errors{{File: file, Line: v.Line, Path: "budget.phases[].drop", Issue: "a dropped phase is its name and drop: true, nothing else (- name: refusals, drop: true)"}}
		}
		out = append(out, p)
	}
	phases.Content = kept
	return out, nil
}

// drop takes the phases named by drops out of the merged document, each of which must be a
// phase the extended lane has.
func drop(file, parent string, merged *yaml.Node, drops []*yaml.Node) error {
	phases := phasesOf(merged)
	for _, d := range drops {
		name := d.Content[keyIndex(d, "name")+1]
		at := -1
		for j, p := range phasesContent(phases) {
			if p.Kind == yaml.MappingNode {
				if i := keyIndex(p, "name"); i >= 0 && p.Content[i+1].Value == name.Value {
					at = j
				}
			}
		}
		if at < 0 {
			return Errors{{File: file, Line: name.Line, Path: "budget.phases[].drop", Issue: fmt.Sprintf("drops phase %q, which %s does not have", name.Value, parent)}}
		}
		phases.Content = append(phases.Content[:at], phases.Content[at+1:]...)
	}
	return nil
}

// phasesOf is the budget.phases sequence of lane document doc, or nil.
func phasesOf(doc *yaml.Node) *yaml.Node {
	if doc.Kind != yaml.MappingNode {
		return nil
	}
	b := keyIndex(doc, "budget")
	if b < 0 || doc.Content[b+1].Kind != yaml.MappingNode {
		return nil
	}
	budget := doc.Content[b+1]
	p := keyIndex(budget, "phases")
	if p < 0 || budget.Content[p+1].Kind != yaml.SequenceNode {
		return nil
	}
	return budget.Content[p+1]
}

func phasesContent(n *yaml.Node) []*yaml.Node {
	if n == nil {
		return nil
	}
	return n.Content
}
