package progress

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/testkit"
)

type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) Add(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
	return f.t
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Without a terminal, a person reads only permanent lines: a phase's end, the stages a pool
// passed (those passed at one instant on one line), a failure, the harness's own lines; every
// detail goes to harness.log alone.
func TestWithoutATerminalOnlyWhatMattersIsPrinted(t *testing.T) {
	now := &fakeNow{t: t0}
	var out, log testkit.Buffer
	c := NewConsole(Options{Out: &out, Log: &log, Now: now.Now})
	c.Printf("lane sim (sim substrate)")
	c.Event(Event{At: t0, Kind: PhaseStart, Phase: "pools", Ceiling: 3 * time.Minute})
	for i := 0; i < 20; i++ {
		c.Event(Event{At: t0.Add(time.Duration(i) * 10 * time.Millisecond), Kind: Detail, Pool: "md0", Stage: "disk-import",
			Detail: "DataVolume md0-disk ImportInProgress " + string(rune('0'+i%10)) + "0%", Since: t0, Replicas: 2})
	}
	c.Lines().Write([]byte("10:00:01.000 pools: MachineDeployment md0 ready replicas: 1 of 2\nsim: a stand-in line\n"))
	t1 := t0.Add(3 * time.Second)
	c.Event(Event{At: t1, Kind: StagePassed, Pool: "md0", Stage: "disk-import", Since: t0})
	c.Event(Event{At: t1, Kind: StagePassed, Pool: "md0", Stage: "vmi-running", Since: t1})
	c.Event(Event{At: t1, Kind: Detail, Pool: "md0", Stage: "guest-boot", Detail: "console silent", Since: t1, Replicas: 2})
	t2 := t1.Add(time.Second)
	c.Event(Event{At: t2, Kind: StagePassed, Pool: "md0", Stage: "guest-boot", Since: t1})
	c.Event(Event{At: t2.Add(time.Second), Kind: Failure, Pool: "md0", Class: "join-rejected", Stage: "join",
		Detail: "pool md0: join-rejected at join: Machine m: kubeadm join refused"})
	c.Event(Event{At: t2.Add(2 * time.Second), Kind: PhaseEnd, Phase: "pools", Since: t0, Outcome: "failed", Ceiling: 3 * time.Minute,
		Detail: "pool md0 failed"})
	c.Close()
	c.Printf("verdict: fail (exit 1)")
	want := []string{
		"10:00:00 e2e: lane sim (sim substrate)",
		"10:00:03 pool md0: passed disk-import 3.0s, vmi-running 0.0s",
		"10:00:04 pool md0: passed guest-boot 1.0s",
		"10:00:05 FAIL pool md0: join-rejected at join: Machine m: kubeadm join refused",
		"10:00:06 phase pools failed in 6.0s (of 3m0s): pool md0 failed",
		"10:00:00 e2e: verdict: fail (exit 1)",
	}
	if got := lines(out.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("printed:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
	logged := log.String()
	for _, w := range []string{"10:00:00.190 pool md0: disk-import: DataVolume md0-disk ImportInProgress 90% (at this stage 0.2s; 0 of 2 past)",
		"pools: MachineDeployment md0 ready replicas: 1 of 2", "sim: a stand-in line", "phase pools started (ceiling 3m0s)",
		"10:00:03 pool md0: passed disk-import 3.0s, vmi-running 0.0s", "FAIL pool md0: join-rejected"} {
		if !strings.Contains(logged, w) {
			t.Errorf("harness.log lacks %q:\n%s", w, logged)
		}
	}
	if strings.Contains(logged, "10:00:01.000 10:00:01.000") {
		t.Error("a detail line kept its own clock beside the console's")
	}
}

// Without a terminal, a pool that waits says where it stands at most once per heartbeat, and
// only while it waits.
func TestAWaitingPoolHasAHeartbeat(t *testing.T) {
	now := &fakeNow{t: t0}
	var out testkit.Buffer
	c := NewConsole(Options{Out: &out, Heartbeat: 30 * time.Second, Now: now.Now})
	defer c.Close()
	c.Event(Event{At: t0, Kind: PhaseStart, Phase: "pools", Ceiling: 3 * time.Minute})
	c.Event(Event{At: t0, Kind: Detail, Pool: "md0", Stage: "disk-import", Detail: "DataVolume d ImportInProgress 42%", Since: t0, Replicas: 2, Past: 1})
	c.Event(Event{At: t0, Kind: Detail, Pool: "acme", Stage: "join", Detail: "waiting for the join", Since: t0, Replicas: 1})
	now.Add(10 * time.Second)
	time.Sleep(300 * time.Millisecond)
	if got := lines(out.String()); len(got) != 0 {
		t.Fatalf("a line before the heartbeat: %q", got)
	}
	c.Event(Event{At: now.Now(), Kind: StagePassed, Pool: "acme", Stage: "workload-pod", Since: t0})
	now.Add(21 * time.Second)
	testkit.Eventually(t.Context(), t, "md0's heartbeat", 2*time.Second, testkit.Holds(func() bool { return strings.Contains(out.String(), "pool md0: at disk-import") }))
	time.Sleep(300 * time.Millisecond)
	got := lines(out.String())
	want := []string{
		"10:00:10 pool acme: passed workload-pod 10.0s",
		"10:00:31 pool md0: at disk-import 31.0s, 1 of 2 past: DataVolume d ImportInProgress 42%",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("printed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	now.Add(29 * time.Second)
	time.Sleep(300 * time.Millisecond)
	if n := len(lines(out.String())); n != 2 {
		t.Fatalf("a second heartbeat within 30s: %q", out.String())
	}
	now.Add(2 * time.Second)
	testkit.Eventually(t.Context(), t, "the next heartbeat", 2*time.Second, testkit.Holds(func() bool { return len(lines(out.String())) == 3 }))
}

// A pool that passed its last stage is reported joined, with the time since its first event.
func TestAPoolThatJoinedSaysHowLongItTook(t *testing.T) {
	now := &fakeNow{t: t0}
	var out testkit.Buffer
	c := NewConsole(Options{Out: &out, Now: now.Now})
	c.Event(Event{At: t0, Kind: Detail, Pool: "kairos", Stage: "bootstrap-template", Detail: "not rendered", Since: t0, Replicas: 1})
	at := t0.Add(20 * time.Second)
	for i, s := range []string{"bootstrap-template", "bootstrap-data", "disk-import", "vmi-running", "guest-boot", "join",
		"node-registered", "provider-id", "node-ref", "ready", "schedulable", "workload-pod"} {
		at := at
		if i < 11 {
			at = t0.Add(time.Duration(i+1) * time.Second)
		}
		c.Event(Event{At: at, Kind: StagePassed, Pool: "kairos", Stage: s, Since: at.Add(-time.Second)})
	}
	c.Close()
	got := lines(out.String())
	if len(got) != 12 || got[11] != "10:00:20 pool kairos: passed workload-pod 1.0s; joined in 20.0s" {
		t.Fatalf("printed:\n%s", out.String())
	}
}

// A pool that joined is followed again through a lifecycle spec's stages: its stages passed are
// printed without "joined in", it has a heartbeat while it waits, and it rests again when the
// spec's phase ends.
func TestAJoinedPoolIsFollowedThroughItsLifecycle(t *testing.T) {
	now := &fakeNow{t: t0}
	var out testkit.Buffer
	c := NewConsole(Options{Out: &out, Now: now.Now, Heartbeat: time.Second})
	stages := []string{"bootstrap-template", "bootstrap-data", "disk-import", "vmi-running", "guest-boot", "join",
		"node-registered", "provider-id", "node-ref", "ready", "schedulable", "workload-pod"}
	for _, s := range stages {
		c.Event(Event{At: t0, Kind: StagePassed, Pool: "remed", Stage: s, Since: t0})
	}
	at := t0.Add(10 * time.Second)
	now.Add(10 * time.Second)
	c.Event(Event{At: at, Kind: PhaseStart, Phase: "remediation", Ceiling: 4 * time.Minute})
	c.Event(Event{At: at, Kind: StagePassed, Pool: "remed", Stage: "broken", Since: at.Add(-time.Second)})
	c.Event(Event{At: at, Kind: Detail, Pool: "remed", Stage: "marked-unhealthy", Detail: "Node remed-a Ready=True", Since: at})
	now.Add(2 * time.Second)
	testkit.Eventually(t.Context(), t, "a heartbeat of the pool at its lifecycle stage", 2*time.Second, testkit.Holds(func() bool {
		return strings.Contains(out.String(), "pool remed: at marked-unhealthy 2.0s: Node remed-a Ready=True")
	}))
	end := at.Add(80 * time.Second)
	c.Event(Event{At: end, Kind: StagePassed, Pool: "remed", Stage: "marked-unhealthy", Since: at})
	c.Event(Event{At: end, Kind: PhaseEnd, Phase: "remediation", Since: at, Outcome: "ok", Ceiling: 4 * time.Minute})
	beats := strings.Count(out.String(), "pool remed: at")
	now.Add(5 * time.Second)
	time.Sleep(300 * time.Millisecond)
	c.Close()
	got := out.String()
	for _, w := range []string{"10:00:10 pool remed: passed broken 1.0s\n", "10:01:30 pool remed: passed marked-unhealthy 1m20s\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
	if strings.Count(got, "joined in") != 1 {
		t.Errorf("only the join says how long it took:\n%s", got)
	}
	if strings.Count(got, "pool remed: at") != beats {
		t.Errorf("the pool still had a heartbeat after its phase ended:\n%s", got)
	}
}
