package join

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Suspect is a state that would fail the join were it final, but that upstream still retries
// or repairs on its own: a provider's failureReason it clears on its next success, a clone
// Cluster API tries again, a providerID a worker patches onto its Node after it registers.
// A detector that sees such a state answers a Suspect instead of a terminal state. The join
// shows it the moment it appears (Progress.Suspects, the pool's status line and harness.log),
// forgets it when upstream clears it, and names it in the deadline failure if the pool never
// passes (StageError.Suspects); it never ends the wait by itself.
type Suspect struct {
	// Stage is where the state holds the pool, Class the class its failure would have.
	Stage Stage
	Class verdict.Class
	// Object is the object whose state it is, "Kind/name".
	Object string
	Detail string
	// Since is when the state began: as upstream stamps it (a condition's lastTransitionTime,
	// a Node's creation) when it does, else when the join first saw it.
	Since time.Time
}

// key tells one suspect from another across looks: the same object in the same trouble.
func (s Suspect) key() string { return string(s.Class) + "|" + string(s.Stage) + "|" + s.Object }

// String is the suspect as a person reads it in a status line or a log.
func (s Suspect) String() string {
	return fmt.Sprintf("suspect %s at %s since %s: %s", s.Class, s.Stage, s.Since.UTC().Format("15:04:05"), s.Detail)
}

// suspects are a pool's suspects as the join follows them, look after look.
type suspects struct {
	cur map[string]Suspect
}

// look takes the suspects of one evaluation made at now, keeps the first time each was seen
// when upstream gave none, and says which appeared and which upstream cleared since the last look.
func (ss *suspects) look(found []Suspect, now time.Time) (appeared, cleared []Suspect) {
	next := make(map[string]Suspect, len(found))
	for _, s := range found {
		if prev, ok := ss.cur[s.key()]; ok {
			if s.Since.IsZero() || prev.Since.Before(s.Since) {
				s.Since = prev.Since
			}
		} else {
			if s.Since.IsZero() || s.Since.After(now) {
				s.Since = now
			}
			appeared = append(appeared, s)
		}
		next[s.key()] = s
	}
	for k, s := range ss.cur {
		if _, ok := next[k]; !ok {
			cleared = append(cleared, s)
		}
	}
	ss.cur = next
	sortSuspects(appeared)
	sortSuspects(cleared)
	return appeared, cleared
}

// list is the suspects now, oldest first.
func (ss *suspects) list() []Suspect {
	out := make([]Suspect, 0, len(ss.cur))
	for _, s := range ss.cur {
		out = append(out, s)
	}
	sortSuspects(out)
	return out
}

func sortSuspects(list []Suspect) {
	sort.Slice(list, func(i, j int) bool {
		if !list[i].Since.Equal(list[j].Since) {
			return list[i].Since.Before(list[j].Since)
		}
		return list[i].key() < list[j].key()
	})
}

// suspectsLine is the suspects of a deadline failure, in one clause.
func suspectsLine(list []Suspect) string {
	if len(list) == 0 {
		return ""
	}
	parts := make([]string, 0, len(list))
	for _, s := range list {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, "; ")
}
