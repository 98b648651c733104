package budget

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

func d(s string) lane.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return lane.Duration(v)
}

// cap 60m, artifacts 5m, diagnostics 10m; phases a 10m, b 20m (reserve 5m), c 10m.
func testBudget() lane.Budget {
	r := d("5m")
	return lane.Budget{
		JobCap: d("60m"), Margin: d("5m"), DiagnosticsReserve: d("10m"), ArtifactReserve: d("5m"),
		Phases: []lane.Phase{
			{Name: "a", Ceiling: d("10m")},
			{Name: "b", Ceiling: d("20m"), Reserve: &r, Timeouts: map[string]lane.Duration{"inner": d("2m")}},
			{Name: "c", Ceiling: d("10m")},
		},
	}
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func TestRootDeadlineKeepsTheArtifactReserve(t *testing.T) {
	f := &fakeClock{t: t0}
	c := New(testBudget(), Options{JobStart: t0.Add(-3 * time.Minute), Now: f.Now})
	if got, want := c.RootDeadline(), t0.Add(52*time.Minute); !got.Equal(want) {
		t.Fatalf("root deadline %s, want job start + 60m cap - 5m artifacts = %s", got, want)
	}
	if got := c.Remaining(); got != 52*time.Minute {
		t.Fatalf("remaining %s", got)
	}
}

func TestPhaseDeadlineIsTheCeilingWhenTimeIsPlenty(t *testing.T) {
	f := &fakeClock{t: t0}
	c := New(testBudget(), Options{Now: f.Now})
	_, got, reserved, err := c.phaseDeadline("", "a")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("deadline %s, want the 10m ceiling", got.Sub(t0))
	}
	// diagnostics 10m + b's reserve 5m + c's ceiling 10m
	if reserved != 25*time.Minute {
		t.Fatalf("reserved %s", reserved)
	}
}

// A job that started late (slow checkout) squeezes a phase so the later phases keep their reserves.
func TestPhaseDeadlineShrinksToKeepLaterReserves(t *testing.T) {
	f := &fakeClock{t: t0}
	c := New(testBudget(), Options{JobStart: t0.Add(-25 * time.Minute), Now: f.Now})
	// root = t0 + 30m; a must leave 25m: deadline t0+5m instead of t0+10m.
	_, got, _, err := c.phaseDeadline("", "a")
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(5 * time.Minute); !got.Equal(want) {
		t.Fatalf("deadline %s after t0, want 5m", got.Sub(t0))
	}
	// b leaves diagnostics 10m + c 10m: root - 20m = t0+10m, less than its 20m ceiling.
	_, got, _, _ = c.phaseDeadline("", "b")
	if want := t0.Add(10 * time.Minute); !got.Equal(want) {
		t.Fatalf("b deadline %s after t0, want 10m", got.Sub(t0))
	}
}

func TestPhaseIsDeclinedWhenItsTimeIsGone(t *testing.T) {
	f := &fakeClock{t: t0}
	c := New(testBudget(), Options{JobStart: t0.Add(-40 * time.Minute), Now: f.Now})
	// root = t0+15m; a must leave 25m -> already 10m past.
	_, span, err := c.Phase(context.Background(), "a")
	var ex *ExhaustedError
	if !errors.As(err, &ex) || span != nil {
		t.Fatalf("want ExhaustedError, got %v", err)
	}
	if !strings.Contains(err.Error(), "phase a declined: the budget is spent (10m0s past its latest end") {
		t.Fatalf("message: %v", err)
	}
	tm := c.Timings()
	if len(tm.Declined) != 1 || tm.Declined[0].What != "phase a" || tm.Phases[0].Outcome != OutcomeDeclined {
		t.Fatalf("declined phase not recorded: %+v", tm)
	}
}

func TestSpanRecordsPlannedAgainstSpent(t *testing.T) {
	f := &fakeClock{t: t0}
	c := New(testBudget(), Options{Now: f.Now, Lane: "x"})
	ctx, span, err := c.Phase(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if dl, ok := ctx.Deadline(); !ok || !dl.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("phase context deadline %v", dl)
	}
	f.Advance(90 * time.Second)
	span.End(nil)
	span.End(errors.New("ignored: a span ends once"))
	if ctx.Err() == nil {
		t.Fatal("ending the span must release its context")
	}
	_, span, _ = c.Phase(context.Background(), "b")
	f.Advance(20 * time.Minute)
	span.End(errors.New("stuck"))
	tm := c.Timings()
	if len(tm.Phases) != 2 {
		t.Fatalf("phases %+v", tm.Phases)
	}
	a, b := tm.Phases[0], tm.Phases[1]
	if a.Outcome != OutcomeOK || a.Spent.D() != 90*time.Second || a.Planned.D() != 10*time.Minute {
		t.Fatalf("a: %+v", a)
	}
	if b.Outcome != OutcomeDeadline || b.Error != "stuck" {
		t.Fatalf("b: %+v", b)
	}
}

func TestTimeoutComesFromTheLane(t *testing.T) {
	c := New(testBudget(), Options{})
	if got, err := c.Timeout("b", "inner"); err != nil || got != 2*time.Minute {
		t.Fatalf("got %s, %v", got, err)
	}
	if _, err := c.Timeout("b", "missing"); err == nil || !strings.Contains(err.Error(), `phase b has no timeout "missing"`) {
		t.Fatalf("missing timeout: %v", err)
	}
	if _, _, _, err := c.phaseDeadline("", "zz"); err == nil || !strings.Contains(err.Error(), "phases: a, b, c") {
		t.Fatalf("unknown phase: %v", err)
	}
}

func TestTimingsMergeAndRoundTrip(t *testing.T) {
	f := &fakeClock{t: t0}
	harness := New(testBudget(), Options{Now: f.Now, Lane: "x"})
	suite := New(testBudget(), Options{Now: f.Now, Lane: "x"})
	_, s1, _ := harness.Phase(context.Background(), "a")
	f.Advance(time.Minute)
	s1.End(nil)
	_, s2, _ := suite.Phase(context.Background(), "b")
	suite.RecordStage("md0", "disk-import", f.Now(), f.Now().Add(3*time.Second))
	f.Advance(time.Minute)
	s2.End(nil)
	harness.Decline("collector tenant-dump", "30s left, needs 60s")
	suite.Mark(Mark{Subject: "platform virt-controller", What: "available again", Detail: "1/1 ready"})
	suite.Mark(Mark{At: t0.Add(30 * time.Second), Subject: "platform virt-controller", What: "restarted", Detail: "signal 9, exit 137"})
	merged := harness.Timings().Merge(suite.Timings())
	path := filepath.Join(t.TempDir(), "timings.json")
	if err := merged.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTimings(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Phases) != 2 || back.Phases[0].Name != "a" || back.Phases[1].Name != "b" {
		t.Fatalf("phases %+v", back.Phases)
	}
	if len(back.Stages) != 1 || back.Stages[0].Spent.D() != 3*time.Second || len(back.Declined) != 1 {
		t.Fatalf("stages/declined %+v %+v", back.Stages, back.Declined)
	}
	// Marks keep their order in time, a zero At being the clock's now.
	if len(back.Marks) != 2 || back.Marks[0].What != "restarted" || !back.Marks[1].At.Equal(f.Now()) || back.Marks[1].Detail != "1/1 ready" {
		t.Fatalf("marks %+v", back.Marks)
	}
}

func TestSkipRecordsThePhaseWithItsReason(t *testing.T) {
	b := lane.Budget{JobCap: lane.Duration(time.Hour), Phases: []lane.Phase{{Name: "cluster", Ceiling: lane.Duration(time.Minute)}}}
	c := New(b, Options{})
	if err := c.Skip("cluster", "E2E_FROM_PHASE=platform"); err != nil {
		t.Fatal(err)
	}
	if err := c.Skip("nope", "x"); err == nil || !strings.Contains(err.Error(), "phases: cluster") {
		t.Fatalf("unknown phase: %v", err)
	}
	ph := c.Timings().Phases
	if len(ph) != 1 || ph[0].Outcome != OutcomeSkipped || ph[0].Note != "E2E_FROM_PHASE=platform" || ph[0].Spent != 0 {
		t.Fatalf("timings: %+v", ph)
	}
}

type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(s string) { r.mu.Lock(); defer r.mu.Unlock(); r.got = append(r.got, s) }
func (r *recorder) PhaseStarted(name string, start, deadline time.Time, ceiling time.Duration) {
	r.add("start " + name + " " + deadline.Sub(start).String() + " of " + ceiling.String())
}
func (r *recorder) PhaseEnded(p PhaseTiming) { r.add("end " + p.Name + " " + string(p.Outcome)) }
func (r *recorder) StagePassed(s StageTiming) {
	r.add("stage " + s.Pool + " " + s.Stage + " " + s.Spent.D().String())
}

// The observer hears every phase start and end (declined and skipped ones too) and every stage
// passed, in the order the clock records them.
func TestObserverHearsWhatTheClockRecords(t *testing.T) {
	f := &fakeClock{t: t0}
	rec := &recorder{}
	c := New(testBudget(), Options{Now: f.Now, Observer: rec})
	_, span, err := c.Phase(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	c.RecordStage("md0", "disk-import", t0, t0.Add(3*time.Second))
	f.Advance(time.Minute)
	span.End(nil)
	if err := c.Skip("b", "E2E_FROM_PHASE=c"); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Hour)
	if _, _, err := c.Phase(context.Background(), "c"); err == nil {
		t.Fatal("phase c after the root deadline was not declined")
	}
	want := []string{"start a 10m0s of 10m0s", "stage md0 disk-import 3s", "end a ok", "end b skipped", "end c declined"}
	if strings.Join(rec.got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("observer heard %q, want %q", rec.got, want)
	}
}
