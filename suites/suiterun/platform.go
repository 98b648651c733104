package suiterun

import (
	"context"
	"fmt"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/platformwatch"
)

// platformListBudget bounds the platform watch's first listing of its namespaces.
const platformListBudget = 30 * time.Second

// newPlatformWatch is the run's platform watch, not started yet: the testbed's joins are handed
// its Outages (testbed.Options.Platform), which names nothing until bringUp starts it.
func (w *World) newPlatformWatch() *platformwatch.Watch {
	o := platformwatch.Options{Components: platformwatch.Components(), Log: w.Log,
		OnEvent: func(e platformwatch.Event) {
			w.Clock.Mark(budget.Mark{At: e.At, Subject: "platform " + e.Component, What: e.Kind, Detail: e.Detail})
		}}
	if w.Mgmt != nil {
		o.Kube = w.Mgmt.Kube
	}
	return platformwatch.New(o)
}

// watchPlatform starts the run's platform watch on the management cluster, for the pools and
// the lifecycle specs (it ends at teardown): restarts of the platform's components show in the
// log as they happen, and a pool stuck while one is down names it. A watch that cannot start
// is said, and the pools are judged without it.
func (w *World) watchPlatform(ctx context.Context) {
	if w.Mgmt == nil || w.Mgmt.Kube == nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, platformListBudget)
	defer cancel()
	if err := w.platform.Start(lctx); err != nil {
		fmt.Fprintf(w.Log, "platform: not watched (%v); a pool stuck while a platform component is down will fail as a deadline\n", err)
	}
}

// endPlatformWatch stops the watch and says what the platform did under the run: each
// component that restarted and whether it recovered.
func (w *World) endPlatformWatch() {
	w.platform.Stop()
	if s := w.platform.Summary(); s != "" {
		fmt.Fprintf(w.Log, "platform: %s\n", s)
	}
}
