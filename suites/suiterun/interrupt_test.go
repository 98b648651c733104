package suiterun

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/capitree"
	"github.com/cozystack/cozy-e2e/internal/diag"
)

// A signal ends the suite's interrupt context at once: what waits on it (the joins) is told
// with the signal's name, one line says what the suite gives up, and a cluster tree asked for
// afterwards is declined in the manifest instead of read.
func TestASignalInterruptsTheSuiteAndDeclinesItsEvidence(t *testing.T) {
	var log bytes.Buffer
	s := &Suite{Name: "kubernetes", Log: &log, manifest: diag.NewManifest(), Env: Env{Artifacts: t.TempDir()}}
	ch := make(chan os.Signal, 1)
	s.interruptOn(ch)
	s.stream = diag.NewTenantStream(diag.TenantStreamOptions{Artifacts: s.Env.Artifacts, Manifest: s.manifest, Process: "suite " + s.Name,
		Interrupt: s.interrupt})
	if err := s.Interrupted(); err != nil {
		t.Fatalf("interrupted before any signal: %v", err)
	}
	told := make(chan error, 1)
	s.OnInterrupt(func(err error) { told <- err })
	ch <- os.Interrupt
	select {
	case err := <-told:
		if err == nil || !strings.Contains(err.Error(), "SIGINT") {
			t.Errorf("OnInterrupt told %v, want the SIGINT", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnInterrupt not called within 5s of the signal")
	}
	rel, err := s.Tree(context.Background(), "cluster c", "ns", "c", "clusters/management/cluster-tree-c.txt", capitree.Options{})
	if rel != "" || err != nil {
		t.Errorf("Tree after the interrupt: %q, %v; want nothing read", rel, err)
	}
	entries := s.manifest.Entries()
	if len(entries) != 1 || entries[0].Status != diag.Declined || !strings.Contains(entries[0].Error, "SIGINT") {
		t.Errorf("manifest after a declined tree: %+v", entries)
	}
	if n := strings.Count(log.String(), "\n"); n != 1 || !strings.Contains(log.String(), "interrupted by SIGINT") {
		t.Errorf("the suite said %d line(s) of its interrupt: %q", n, log.String())
	}
}
