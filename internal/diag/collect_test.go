package diag

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/lane"
)

// Collectors run in order, each within its share of the reserve: one that overruns is cut and
// recorded truncated, one that errs is failed, and one that cannot fit in what is left of the
// clock is declined, on the manifest and on the clock, never dropped.
func TestCollectorsAreBoundedAndDeclinedWhenTimeIsShort(t *testing.T) {
	dir := t.TempDir()
	a, _ := NewArtifacts(dir, NewRedactor(), 0)
	m := NewManifest()
	// A lane whose root deadline leaves 1s: less than the 10s reserve.
	b := lane.Budget{JobCap: lane.Duration(time.Minute), ArtifactReserve: lane.Duration(59 * time.Second),
		DiagnosticsReserve: lane.Duration(10 * time.Second), Phases: []lane.Phase{{Name: "pools", Ceiling: lane.Duration(time.Second)}}}
	clock := budget.New(b, budget.Options{})
	var order []string
	var mu sync.Mutex
	ran := func(name string) { mu.Lock(); order = append(order, name); mu.Unlock() }
	cs := []collector{
		{name: "quick", scope: "pool md0", share: 0.02, run: func(ctx context.Context, w *work) error {
			ran("quick")
			return w.file("pools/md0/quick.txt", []byte("ok\n"), 0)
		}},
		{name: "slow", scope: "pool md0", share: 0.03, run: func(ctx context.Context, w *work) error {
			ran("slow")
			<-ctx.Done()
			return ctx.Err()
		}},
		{name: "broken", scope: "cluster tenant", share: 0.01, run: func(ctx context.Context, w *work) error {
			ran("broken")
			return errors.New("listing CSRs: connection refused")
		}},
		{name: "dump", scope: "cluster tenant", share: 0.5, run: func(ctx context.Context, w *work) error {
			ran("dump")
			return nil
		}},
	}
	start := time.Now()
	entries := runCollectors(context.Background(), a, m, "test", DefaultLimits(), time.Now, Budget{Clock: clock, Reserve: 10 * time.Second}, cs, nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the collectors took %s with 1s left", took)
	}
	want := map[string]Status{"quick": Complete, "slow": Truncated, "broken": Failed, "dump": Declined}
	for _, e := range entries {
		if e.Status != want[e.Name] {
			t.Errorf("%s: %s (%s), want %s", e.Name, e.Status, e.Error, want[e.Name])
		}
	}
	if strings.Join(order, ",") != "quick,slow,broken" {
		t.Errorf("ran %v", order)
	}
	if len(m.Entries()) != 4 {
		t.Fatalf("manifest %+v", m.Entries())
	}
	d := clock.Timings().Declined
	if len(d) != 1 || d[0].What != "collector dump (cluster tenant)" || !strings.Contains(d[0].Reason, "needs up to 5s") {
		t.Fatalf("declined on the clock: %+v", d)
	}
}

// Cluster-wide collectors run once however many failing pools ask at the same time.
func TestClusterWideCollectorsRunOnce(t *testing.T) {
	a, _ := NewArtifacts(t.TempDir(), NewRedactor(), 0)
	m := NewManifest()
	var mu sync.Mutex
	runs := 0
	c := collector{name: "previous-logs", scope: "clusters", share: 0.1, key: "previous-logs", run: func(ctx context.Context, w *work) error {
		mu.Lock()
		runs++
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		return nil
	}}
	var once onceCache
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			es := runCollectors(context.Background(), a, m, "test", DefaultLimits(), time.Now, Budget{Reserve: 10 * time.Second}, []collector{c}, &once)
			if len(es) != 1 || es[0].Status != Complete {
				t.Errorf("entries %+v", es)
			}
		}()
	}
	wg.Wait()
	if runs != 1 || len(m.Entries()) != 1 {
		t.Fatalf("ran %d times, %d manifest entries", runs, len(m.Entries()))
	}
}

// Later failures of a run share the reserve with the earlier ones: a collector that does not
// fit in what they left is declined.
func TestCollectorsShareOneWindow(t *testing.T) {
	a, _ := NewArtifacts(t.TempDir(), NewRedactor(), 0)
	m := NewManifest()
	c := collector{name: "events", scope: "pool kairos", share: 0.1, run: func(ctx context.Context, w *work) error { return nil }}
	b := Budget{Reserve: 10 * time.Second, used: 9500 * time.Millisecond}
	es := runCollectors(context.Background(), a, m, "test", DefaultLimits(), time.Now, b, []collector{c}, nil)
	if len(es) != 1 || es[0].Status != Declined || !strings.Contains(es[0].Error, "needs up to 1s") {
		t.Fatalf("entries %+v", es)
	}
}
