package suiterun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/testbed"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

func TestMissingEnvironmentIsNamedAllAtOnce(t *testing.T) {
	_, err := FromEnviron(func(k string) string {
		if k == EnvJobStart {
			return "yesterday"
		}
		return ""
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"E2E_LANE_FILE is not set", "E2E_KUBECONFIG is not set", "E2E_RUN_ID is not set",
		`E2E_JOB_START="yesterday" is not an RFC 3339 time`, "make e2e"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: missing %q", err, want)
		}
	}
	env := map[string]string{EnvLaneFile: "l.yaml", EnvKubeconfig: "k", EnvArtifacts: "a", EnvSuiteArtifacts: "a/s",
		EnvRunID: "ab1", EnvJobStart: "2026-12-02T10:00:00Z"}
	e, err := FromEnviron(func(k string) string { return env[k] })
	if err != nil || e.JobStart.Hour() != 10 || e.RunID != "ab1" {
		t.Fatalf("%+v %v", e, err)
	}
}

func specReport(state types.SpecState, msg string, pool string) types.SpecReport {
	r := types.SpecReport{ContainerHierarchyTexts: []string{"kubernetes"}, LeafNodeText: "pool " + pool + " joins",
		State: state, Failure: types.Failure{Message: msg}, EndTime: time.Now()}
	if pool != "" {
		r.ReportEntries = types.ReportEntries{{Name: PoolEntry, Value: types.WrapEntryValue(pool)}}
	}
	return r
}

// A spec that failed on a noted StageError carries its class, stage, pool and decision time;
// an assertion failure is a product assertion of the spec's pool.
func TestFailedSpecsBecomeFailuresWithTheirClass(t *testing.T) {
	f := NewFailures()
	decided := time.Now().Add(-5 * time.Second) // the join decided before the spec reported it
	se := &join.StageError{Pool: "kairos", Stage: join.StageDiskImport, Class: verdict.DiskImport, Detail: "401",
		Evidence: []string{"pools/kairos/dv.yaml"}, At: decided}
	f.Note("kubernetes pool kairos joins", "kairos", se)
	f.Spec(specReport(types.SpecStateFailed, se.Error(), "kairos"))
	f.AddEvidence("kubernetes pool md0 joins", []string{"pools/md0/events.jsonl"})
	f.Spec(specReport(types.SpecStateFailed, "Expected\n    <string>: a\nto equal\n    <string>: b", "md0"))
	f.Spec(specReport(types.SpecStatePassed, "", "acme"))
	f.Spec(specReport(types.SpecStatePanicked, "nil map", "acme"))
	f.Spec(specReport(types.SpecStateInterrupted, "interrupted by user", ""))
	// A spec the signal ended is not judged by what it noted on its way out.
	f.Note("kubernetes pool md1 joins", "md1", errors.New("pool md1: the spec ended (Interrupted by User) while the pool was joining"))
	f.Spec(specReport(types.SpecStateInterrupted, "pool md1: the spec ended (Interrupted by User) while the pool was joining", "md1"))
	got := f.All()
	if len(got) != 5 {
		t.Fatalf("%d failures: %+v", len(got), got)
	}
	want := []struct {
		class verdict.Class
		stage string
		pool  string
	}{
		{verdict.DiskImport, "disk-import", "kairos"},
		{verdict.ProductAssertion, "", "md0"},
		{verdict.Harness, "", "acme"},
		{verdict.Deadline, "spec interrupted", ""},
		{verdict.Deadline, "spec interrupted", "md1"},
	}
	for i, w := range want {
		if got[i].Class != w.class || got[i].Stage != w.stage || got[i].Pool != w.pool {
			t.Errorf("failure %d: %s at %q pool %q; want %s at %q pool %q", i, got[i].Class, got[i].Stage, got[i].Pool, w.class, w.stage, w.pool)
		}
	}
	if !got[0].At.Equal(decided) || len(got[0].Evidence) != 1 || got[1].Evidence[0] != "pools/md0/events.jsonl" {
		t.Errorf("decision time or evidence: %+v", got[:2])
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err   error
		class verdict.Class
		stage string
	}{
		{fmt.Errorf("wrapped: %w", &join.StageError{Stage: join.StageReady, Class: verdict.Deadline}), verdict.Deadline, "ready"},
		{&tenant.WaitError{Phase: "tenant", Class: verdict.Deadline}, verdict.Deadline, "tenant"},
		{&tenant.WaitError{Phase: "teardown", Class: verdict.Teardown}, verdict.Teardown, "teardown"},
		{&budget.ExhaustedError{Phase: "refusals"}, verdict.Deadline, "refusals"},
		{&testbed.DeadlineError{Phase: "refusals", Err: fmt.Errorf("client rate limiter Wait returned an error: %w", context.DeadlineExceeded)}, verdict.Deadline, "refusals"},
		{errors.New("boom"), verdict.ProductAssertion, ""},
	} {
		j := classify(tc.err)
		if c, s := j.Class, j.Stage; c != tc.class || s != tc.stage {
			t.Errorf("%v: %s %q, want %s %q", tc.err, c, s, tc.class, tc.stage)
		}
	}
}

// Two pools stuck at the same stage with the same words keep their own failures: a record is
// found by its spec, never by its message.
func TestFailuresAreKeptBySpecNotByMessage(t *testing.T) {
	f := NewFailures()
	same := "stuck at ready for 1m0s of 1m0s: Node not Ready"
	early, late := time.Now().Add(-time.Minute), time.Now().Add(-time.Second)
	f.Note("kubernetes pool md0 joins", "md0", &join.StageError{Pool: "md0", Stage: join.StageReady, Class: verdict.Deadline, Detail: same,
		Evidence: []string{"pools/md0/nodes.yaml"}, At: early})
	f.Note("kubernetes pool kairos joins", "kairos", &join.StageError{Pool: "kairos", Stage: join.StageReady, Class: verdict.Deadline, Detail: same,
		Evidence: []string{"pools/kairos/nodes.yaml"}, At: late})
	// Both specs report the same message text (a pool-less wording would do the same).
	a := f.Judge(specReport(types.SpecStateFailed, same, "md0"))
	b := f.Judge(specReport(types.SpecStateFailed, same, "kairos"))
	if a.Pool != "md0" || a.Evidence[0] != "pools/md0/nodes.yaml" || !a.At.Equal(early) {
		t.Errorf("md0: %+v", a)
	}
	if b.Pool != "kairos" || b.Evidence[0] != "pools/kairos/nodes.yaml" || !b.At.Equal(late) {
		t.Errorf("kairos: %+v", b)
	}
}

// A plain assertion that failed after its phase's deadline is a deadline at that phase, not a
// product failure; the same assertion inside the phase's time is a product assertion.
func TestAnAssertionAfterThePhaseRanOutIsADeadline(t *testing.T) {
	f := NewFailures()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	live, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	f.Within("kubernetes pool md0 joins", "pools", expired)
	f.Within("kubernetes pool kairos joins", "pools", live)
	msg := "reading MachineHealthCheck: client rate limiter Wait returned an error: context deadline exceeded"
	if v := f.Judge(specReport(types.SpecStateFailed, msg, "md0")); v.Class != verdict.Deadline || v.Stage != "pools" || v.Pool != "md0" {
		t.Errorf("after the deadline: %s at %q pool %q", v.Class, v.Stage, v.Pool)
	}
	if v := f.Judge(specReport(types.SpecStateFailed, "Expected 2 to equal 1", "kairos")); v.Class != verdict.ProductAssertion {
		t.Errorf("inside the phase: %s", v.Class)
	}
}

// A deadline error of a pool's step names its pool.
func TestDeadlineErrorNamesItsPool(t *testing.T) {
	e := &testbed.DeadlineError{Phase: "pools", Pool: "kairos", Err: context.DeadlineExceeded}
	if !strings.HasPrefix(e.Error(), "pool kairos: pools:") {
		t.Errorf("%q", e.Error())
	}
	if j := classify(e); j.Class != verdict.Deadline || j.Stage != "pools" {
		t.Errorf("%+v", j)
	}
	if j := classify(&ConfigurationError{File: "lanes/x.yaml", Err: errors.New("no phase")}); j.Class != verdict.Configuration {
		t.Errorf("configuration: %+v", j)
	}
}

// Each failure is told once, when it is decided: a typed one when it is noted (not again when
// its spec reports), an assertion when its spec reports, a teardown leak when it is added.
func TestEachFailureIsToldOnceWhenDecided(t *testing.T) {
	f := NewFailures()
	var told []string
	f.Decided = func(v verdict.Failure) { told = append(told, v.Line()) }
	se := &join.StageError{Pool: "md0", Stage: join.StageJoin, Class: verdict.JoinRejected, Detail: "refused"}
	f.Note("kubernetes pool md0 joins", "md0", se)
	if len(told) != 1 || told[0] != "pool md0: join-rejected at join: refused" {
		t.Fatalf("told %q", told)
	}
	f.Spec(specReport(types.SpecStateFailed, se.Error(), "md0"))
	f.Spec(specReport(types.SpecStateFailed, "Expected a to equal b", "acme"))
	f.Add(verdict.Failure{Spec: "teardown", Class: verdict.Teardown, Stage: "teardown", Message: "PVC p left"})
	want := []string{"pool md0: join-rejected at join: refused", "pool acme: product-assertion: Expected a to equal b", "teardown: PVC p left"}
	if strings.Join(told, "\n") != strings.Join(want, "\n") {
		t.Fatalf("told:\n%s\nwant:\n%s", strings.Join(told, "\n"), strings.Join(want, "\n"))
	}
}

// A failed spec's Ginkgo state reaches verdict.Judge by its name: each state Judge tells apart
// must be spelled as Ginkgo spells it, or Judge would take a timeout or a signal for a plain
// failure.
func TestGinkgoStatesAreJudgesEndings(t *testing.T) {
	for state, want := range map[types.SpecState]verdict.Ending{
		types.SpecStateFailed:      verdict.SpecFailed,
		types.SpecStateInterrupted: verdict.SpecInterrupted,
		types.SpecStatePanicked:    verdict.SpecPanicked,
		types.SpecStateTimedout:    verdict.SpecTimedOut,
		types.SpecStateAborted:     verdict.SpecAborted,
	} {
		if got := verdict.Ending(state.String()); got != want {
			t.Errorf("Ginkgo's %v is %q; verdict.Judge tells it apart as %q", state, got, want)
		}
	}
}
