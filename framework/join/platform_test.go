package join

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// A pool whose wait runs out while a platform component is down fails with the platform's
// class, naming the component; with the platform up it stays a deadline.
func TestDeadlineWithThePlatformDownIsThePlatforms(t *testing.T) {
	down := "virt-controller unavailable since 10:41:07, CrashLoopBackOff (Pod cozy-kubevirt/virt-controller-sim, 3 restart(s)), last exit 2 Error: unknown flag: --x"
	deadline := func() *StageError {
		return &StageError{Pool: "md0", Stage: StageDiskImport, Class: verdict.Deadline, Detail: "DataVolume md0-0: WaitForFirstConsumer",
			Elapsed: 170 * time.Second, Budget: 177 * time.Second}
	}
	w := &Watcher{o: Options{Platform: func(context.Context) []string { return []string{down} }}}
	e := w.platformDown(context.Background(), deadline())
	if e.Class != verdict.Platform {
		t.Fatalf("class %s, want platform", e.Class)
	}
	want := "pool md0: stuck at disk-import for 2m50s of 2m57s: " + down + " (the pool stood at: DataVolume md0-0: WaitForFirstConsumer)"
	if e.Error() != want {
		t.Fatalf("error\n%s\nwant\n%s", e.Error(), want)
	}
	up := &Watcher{o: Options{Platform: func(context.Context) []string { return nil }}}
	if e := up.platformDown(context.Background(), deadline()); e.Class != verdict.Deadline || strings.Contains(e.Error(), "unavailable") {
		t.Fatalf("with the platform up: %s %v", e.Class, e)
	}
	if e := (&Watcher{}).platformDown(context.Background(), deadline()); e.Class != verdict.Deadline {
		t.Fatalf("without a platform watch: %s", e.Class)
	}
}
