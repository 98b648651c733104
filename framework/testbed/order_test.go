package testbed

import (
	"context"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/join"
)

// Specs may be ordered freely: a spec in a phase of its own, placed between two pools' join
// specs, ends the pools phase only once every join ended on its own (EndWhenJoined), so the
// join spec after it still finds its pool joined. Ending the phase at once (End) stops the
// join still running, and the join spec after it fails.
func TestASpecBetweenJoinSpecsStopsNoJoin(t *testing.T) {
	for _, c := range []struct {
		name   string
		end    func(ps *Pools)
		joined bool
	}{
		{"EndWhenJoined", func(ps *Pools) { ps.EndWhenJoined(context.Background()) }, true},
		{"End", func(ps *Pools) { ps.End() }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := simTenant(t, nil)
			ps := tn.newPools(context.Background())
			first, later := tn.Pools[0].Name(), tn.Pools[1].Name()
			// A join in the background: it joins after a while, unless the phase ends first.
			fake := func(pool string, after time.Duration) {
				jr := ps.joins[pool]
				go func() {
					defer close(jr.done)
					select {
					case <-time.After(after):
						jr.rec = &join.Record{Result: &join.Result{}}
					case <-ps.base.Done():
						jr.err = context.Cause(ps.base)
					}
				}()
			}
			for _, p := range tn.Pools {
				after := time.Duration(0)
				if p.Name() == later {
					after = 200 * time.Millisecond
				}
				fake(p.Name(), after)
			}
			// The join spec of the first pool, then a spec of another phase, then the join
			// spec of the later pool.
			if _, err := ps.Await(context.Background(), first); err != nil {
				t.Fatalf("pool %s: %v", first, err)
			}
			c.end(ps)
			rec, err := ps.Await(context.Background(), later)
			if got := err == nil && rec != nil; got != c.joined {
				t.Errorf("pool %s after a spec ended the pools phase with %s: record %v, error %v; want joined %v", later, c.name, rec != nil, err, c.joined)
			}
		})
	}
}
