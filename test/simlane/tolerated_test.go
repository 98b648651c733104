package simlane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/diag"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/guest"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// fired proves, from a run's artifacts, that a fault a correct harness absorbs did happen: a
// green run under a fault that never fired proves nothing. Every fault of the catalogue that
// passes has one (TestScenariosCoverTheCatalogue).
var fired = map[faults.Name]func(t *testing.T, l *lane.Lane, set *faults.Set, art string, obs []simenv.Observation){
	faults.MHCReplacement:          machineReplaced,
	faults.APIServerTransient:      transientAnswered,
	faults.BootstrapTransient:      suspectCleared(faults.BootstrapTransient, verdict.Bootstrap, " set: ", "cleared", 0),
	faults.MachineSetTransient:     suspectCleared(faults.MachineSetTransient, verdict.Bootstrap, "cannot be called", "answers again", 0),
	faults.ProviderIDLate:          suspectCleared(faults.ProviderIDLate, verdict.Identity, "registered", "patched", guest.ProviderIDLateDelay),
	faults.DiskImportOOM:           importerReplaced,
	faults.VMICrashOnce:            crashedOnce,
	faults.ControllerKilled:        controllerRestarted,
	faults.GuestKubeletCrashOnce:   kubeletKilled,
	faults.RegistryUnavailableOnce: checkRegistryUnavailable,
}

// kubeletKilled: in every pool the fault targets, the sim asked the guest OS to kill its kubelet
// (its template's patch), the guest's console, read through virt-api, shows machined's line for
// a kubelet killed by SIGKILL (exit code 137) with its last log line, and the harness showed it
// as a join-rejected suspect that cleared as the pool joined.
func kubeletKilled(t *testing.T, l *lane.Lane, set *faults.Set, art string, obs []simenv.Observation) {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(art, "harness.log"))
	if err != nil {
		t.Errorf("%s: harness.log: %v", faults.GuestKubeletCrashOnce, err)
	}
	for _, p := range l.Pools {
		if !set.Active(faults.GuestKubeletCrashOnce, p.Name, false) {
			continue
		}
		asked := slices.ContainsFunc(obs, func(o simenv.Observation) bool { return o.Fault == faults.GuestKubeletCrashOnce && o.Pool == p.Name })
		if !asked {
			t.Errorf("pool %s: the sim recorded no %s patch: the fault did not fire", p.Name, faults.GuestKubeletCrashOnce)
			continue
		}
		killed := ""
		files, _ := filepath.Glob(filepath.Join(art, "pools", p.Name, "consoles", "*", "*.log"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(data), "\n") {
				if strings.Contains(line, `going to restart forever: task "kubelet" failed: exit code 137 (last log "`) {
					killed = line
				}
			}
		}
		if killed == "" {
			t.Errorf("pool %s: no console of it shows machined's line for a kubelet killed (exit code 137): %s", p.Name, files)
			continue
		}
		if !suspectShownAndCleared(log, p.Name, verdict.JoinRejected) {
			t.Errorf("pool %s: harness.log does not show a %s suspect appearing and clearing under %s", p.Name, verdict.JoinRejected, faults.GuestKubeletCrashOnce)
			continue
		}
		t.Logf("pool %s joined though its kubelet was killed once; the console said: %s", p.Name, killed)
	}
}

// controllerRestarted: every controller the fault names was killed (the sim recorded it), and
// the harness's platform watch showed its restart and its recovery in harness.log.
func controllerRestarted(t *testing.T, _ *lane.Lane, set *faults.Set, art string, obs []simenv.Observation) {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(art, "harness.log"))
	if err != nil {
		t.Errorf("%s: harness.log: %v", faults.ControllerKilled, err)
	}
	summary, err := os.ReadFile(filepath.Join(art, "summary.md"))
	if err != nil {
		t.Errorf("%s: summary.md: %v", faults.ControllerKilled, err)
	}
	for _, name := range set.Targets(faults.ControllerKilled) {
		killed := false
		for _, o := range obs {
			killed = killed || (o.Fault == faults.ControllerKilled && o.Object == "process "+processName(name))
		}
		if !killed {
			t.Errorf("%s@%s: the sim recorded no kill; the run proves nothing", faults.ControllerKilled, name)
			continue
		}
		// The live line of the restart, and the run's end saying it recovered.
		recovered := regexp.MustCompile(regexp.QuoteMeta(name) + ` restarted \d+ time\(s\), available again`)
		if !bytes.Contains(log, []byte("platform: "+name+" restarted: ")) || !recovered.Match(log) {
			t.Errorf("%s@%s: harness.log does not show the platform watch seeing its restart and, at the end, its recovery", faults.ControllerKilled, name)
			continue
		}
		// The report keeps it: summary.md's platform table (report.html's is the same rows).
		if !bytes.Contains(summary, []byte("| platform "+name+" | restarted | ")) {
			t.Errorf("%s@%s: summary.md's \"Platform under the pools\" does not list its restart", faults.ControllerKilled, name)
			continue
		}
		t.Logf("%s@%s: restarted, and the run passed", faults.ControllerKilled, name)
	}
}

// processName is the controller process a fault's controller name runs as (CAPK's is
// capk-manager, internal/sim/realupstream/capk.go).
func processName(name string) string {
	if name == "capk" {
		return "capk-manager"
	}
	if name == "cabpt" {
		return "cabpt-manager"
	}
	return name
}

// suspectCleared proves fault f, one upstream retries or repairs: in every pool it targets, the
// sim recorded the trouble (an observation whose detail holds began) and its end (ended), at
// least apart later, and the harness showed a suspect of class in that pool and its clearing in
// harness.log (the pool passed: the run is green).
func suspectCleared(f faults.Name, class verdict.Class, began, ended string, apart time.Duration) func(*testing.T, *lane.Lane, *faults.Set, string, []simenv.Observation) {
	return func(t *testing.T, l *lane.Lane, set *faults.Set, art string, obs []simenv.Observation) {
		t.Helper()
		log, err := os.ReadFile(filepath.Join(art, "harness.log"))
		if err != nil {
			t.Errorf("%s: harness.log: %v", f, err)
		}
		oses := osOf(l)
		for _, p := range l.Pools {
			if !set.Active(f, p.Name, oses[p.Class] == osfamily.Kairos) {
				continue
			}
			var from, to time.Time
			for _, o := range obs {
				switch {
				case o.Fault != f || o.Pool != p.Name:
				case from.IsZero() && strings.Contains(o.Detail, began):
					from = o.At
				case !from.IsZero() && to.IsZero() && strings.Contains(o.Detail, ended):
					to = o.At
				}
			}
			switch {
			case from.IsZero() || to.IsZero():
				t.Errorf("pool %s: the sim recorded no %q and %q of %s: the fault did not fire", p.Name, began, ended, f)
				continue
			case to.Sub(from) < apart:
				t.Errorf("pool %s: %s ended %s after it began, sooner than %s", p.Name, f, to.Sub(from), apart)
			}
			if !suspectShownAndCleared(log, p.Name, class) {
				t.Errorf("pool %s: harness.log does not show a %s suspect appearing and clearing under %s", p.Name, class, f)
				continue
			}
			t.Logf("pool %s: %s lasted %s; the harness showed it as a suspect and the pool passed", p.Name, f, to.Sub(from).Round(time.Millisecond))
		}
	}
}

// suspectShownAndCleared reports whether harness.log (log) shows a suspect of class on pool
// appearing and then clearing.
func suspectShownAndCleared(log []byte, pool string, class verdict.Class) bool {
	shown := fmt.Sprintf("pool %s: suspect %s at ", pool, class)
	gone := fmt.Sprintf("pool %s: suspect %s cleared after ", pool, class)
	return bytes.Contains(log, []byte(shown)) && bytes.Contains(log, []byte(gone))
}

// checkTolerated runs the proof of every absorbed fault the run selected.
func checkTolerated(t *testing.T, l *lane.Lane, set *faults.Set, art string) {
	t.Helper()
	var obs []simenv.Observation
	read := false
	for _, n := range set.Names() {
		if f, _ := faults.Lookup(n); !f.Passes {
			continue
		}
		if !read {
			obs, read = observations(t, art), true
		}
		fired[n](t, l, set, art, obs)
	}
}

// crashedOnce: in every pool the fault targets, the sim crashed exactly one running VMI (the
// pool joined nonetheless: the run is green, its VM controller started a new VMI).
func crashedOnce(t *testing.T, l *lane.Lane, set *faults.Set, _ string, obs []simenv.Observation) {
	t.Helper()
	oses := osOf(l)
	for _, p := range l.Pools {
		if !set.Active(faults.VMICrashOnce, p.Name, oses[p.Class] == osfamily.Kairos) {
			continue
		}
		var crashed []string
		for _, o := range obs {
			if o.Fault == faults.VMICrashOnce && o.Pool == p.Name {
				crashed = append(crashed, o.Object+" "+o.UID)
			}
		}
		if len(crashed) != 1 {
			t.Errorf("pool %s: the sim crashed %d running VMIs under %s, want 1: %v", p.Name, len(crashed), faults.VMICrashOnce, crashed)
			continue
		}
		t.Logf("%s: pool %s joined though %s crashed", faults.VMICrashOnce, p.Name, crashed[0])
	}
}

// transientAnswered: the sim's proxy answered at least one request 500, as it records each
// injection.
func transientAnswered(t *testing.T, _ *lane.Lane, _ *faults.Set, _ string, obs []simenv.Observation) {
	t.Helper()
	n := 0
	for _, o := range obs {
		if o.Fault == faults.APIServerTransient {
			n++
		}
	}
	if n == 0 {
		t.Errorf("%s: the sim's proxy recorded no request it answered 500; the run proves nothing of the retries", faults.APIServerTransient)
		return
	}
	t.Logf("%s: the harness absorbed %d injected 500s", faults.APIServerTransient, n)
}

// machineReplaced: in every pool the fault targets, the sim stalled one Machine (its record
// names it by UID), the harness saw that Machine deleted while the pools phase ran, and saw
// another Machine, created after the stall, get a Node.
func machineReplaced(t *testing.T, l *lane.Lane, set *faults.Set, art string, obs []simenv.Observation) {
	t.Helper()
	oses := osOf(l)
	var poolsEnd time.Time
	if tm, err := budget.ReadTimings(filepath.Join(art, "timings.json")); err != nil {
		t.Errorf("timings.json: %v", err)
	} else {
		for _, p := range tm.Phases {
			if p.Name == "pools" {
				poolsEnd = p.End
			}
		}
	}
	for _, p := range l.Pools {
		if !set.Active(faults.MHCReplacement, p.Name, oses[p.Class] == osfamily.Kairos) {
			continue
		}
		var stalled *simenv.Observation
		for i, o := range obs {
			if o.Fault == faults.MHCReplacement && o.Pool == p.Name {
				stalled = &obs[i]
				break
			}
		}
		if stalled == nil || stalled.UID == "" {
			t.Errorf("pool %s: the sim recorded no Machine it stalled under %s", p.Name, faults.MHCReplacement)
			continue
		}
		machines := machineHistory(t, filepath.Join(art, "pools", p.Name, "timeline.jsonl"))
		old := machines[stalled.UID]
		switch {
		case old == nil:
			t.Errorf("pool %s: the harness's timeline never saw the stalled Machine %s (uid %s)", p.Name, stalled.Object, stalled.UID)
		case old.deleted.IsZero():
			t.Errorf("pool %s: the stalled Machine %s was never deleted: no health check replaced it", p.Name, old.name)
		case !poolsEnd.IsZero() && old.deleted.After(poolsEnd):
			t.Errorf("pool %s: the stalled Machine %s was deleted at %s, after the pools phase (%s): by teardown, not by its health check",
				p.Name, old.name, old.deleted.Format(time.RFC3339Nano), poolsEnd.Format(time.RFC3339Nano))
		case old.node != "":
			t.Errorf("pool %s: the stalled Machine %s got Node %s; the fault did not stall it", p.Name, old.name, old.node)
		}
		var replacement *machineSeen
		for uid, m := range machines {
			if uid != stalled.UID && m.added.After(stalled.At) && m.node != "" {
				replacement = m
			}
		}
		if replacement == nil {
			t.Errorf("pool %s: no Machine created after %s stalled got a Node: nothing replaced it", p.Name, stalled.Object)
			continue
		}
		t.Logf("pool %s: Machine %s stalled and was deleted; Machine %s, created %s later, joined as Node %s",
			p.Name, old.name, replacement.name, replacement.added.Sub(stalled.At).Round(time.Millisecond), replacement.node)
	}
}

// machineSeen is one Machine as a pool's timeline shows it.
type machineSeen struct {
	name           string
	added, deleted time.Time
	node           string // its nodeRef, once set
}

// machineHistory reads the Machines of a pool's timeline, by UID.
func machineHistory(t *testing.T, path string) map[string]*machineSeen {
	t.Helper()
	out := map[string]*machineSeen{}
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("the pool's timeline: %v", err)
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var c diag.Change
		if json.Unmarshal(sc.Bytes(), &c) != nil || c.Kind != "Machine" || c.UID == "" {
			continue
		}
		m := out[c.UID]
		if m == nil {
			m = &machineSeen{name: c.Name, added: c.At}
			out[c.UID] = m
		}
		if c.Change == "deleted" {
			m.deleted = c.At
		}
		if n := c.Fields["nodeRef"]; n != "" {
			m.node = n
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("%s: %v", path, err)
	}
	return out
}
