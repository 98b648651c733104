package progress

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The pools phase starts while the tenant phase still waits for a cluster: both run, each
// keeps its line, a detail outside any pool belongs to the tenant phase (the oldest) until it
// ends, and the end of one leaves the other running.
func TestOverlappingPhasesEachKeepTheirOwn(t *testing.T) {
	var out testkit.Buffer
	c := NewConsole(Options{Out: &out, Now: (&fakeNow{t: t0}).Now})
	defer c.Close()
	c.Event(Event{At: t0, Kind: PhaseStart, Phase: "tenant", Ceiling: 10 * time.Minute})
	c.Event(Event{At: t0.Add(5 * time.Second), Kind: PhaseStart, Phase: "pools", Ceiling: 15 * time.Minute})
	c.Event(Event{At: t0.Add(6 * time.Second), Kind: Detail, Detail: "waiting for the control plane of kubernetes-pools"})
	state := func() (names []string, details []string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, u := range c.phases {
			names, details = append(names, u.name), append(details, u.detail)
		}
		return names, details
	}
	names, details := state()
	if strings.Join(names, ",") != "tenant,pools" || details[0] != "waiting for the control plane of kubernetes-pools" || details[1] != "" {
		t.Fatalf("phases %v, details %q; want tenant then pools, the detail the tenant's", names, details)
	}
	c.Event(Event{At: t0.Add(17 * time.Second), Kind: PhaseEnd, Phase: "tenant", Since: t0, Outcome: "ok", Ceiling: 10 * time.Minute})
	c.Event(Event{At: t0.Add(18 * time.Second), Kind: Detail, Phase: "pools", Detail: "refusal cluster rendering"})
	names, details = state()
	if strings.Join(names, ",") != "pools" || details[0] != "refusal cluster rendering" {
		t.Fatalf("after the tenant phase: phases %v, details %q; want pools alone with its detail", names, details)
	}
	testkit.Eventually(t.Context(), t, "the tenant phase's end", 2*time.Second, testkit.Holds(func() bool { return strings.Contains(out.String(), "10:00:17 phase tenant ok in 17.0s (of 10m0s)") }))
}

// The suite's emitter gives a detail without a phase to the oldest phase running, else to
// the last started.
func TestTheEmitterGivesADetailToTheOldestPhaseRunning(t *testing.T) {
	var b bytes.Buffer
	e := NewEmitter(&b)
	e.Emit(Event{Kind: PhaseStart, Phase: "tenant"})
	e.Emit(Event{Kind: PhaseStart, Phase: "pools"})
	e.Emit(Event{Kind: Detail, Detail: "a"})
	e.Emit(Event{Kind: PhaseEnd, Phase: "tenant"})
	e.Emit(Event{Kind: Detail, Detail: "b"})
	e.Emit(Event{Kind: PhaseEnd, Phase: "pools"})
	e.Emit(Event{Kind: Detail, Detail: "c"})
	var got []string
	dec := json.NewDecoder(&b)
	for dec.More() {
		var ev Event
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind == Detail {
			got = append(got, ev.Detail+":"+ev.Phase)
		}
	}
	if want := "a:tenant b:pools c:pools"; strings.Join(got, " ") != want {
		t.Errorf("got %s, want %s", strings.Join(got, " "), want)
	}
}
