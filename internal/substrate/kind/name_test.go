package kind

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// The cluster is named after the job when E2E_KIND_CLUSTER says so (the workflows), else after
// the lane; a name kind would refuse is refused before anything runs.
func TestClusterNameFollowsTheJob(t *testing.T) {
	l := pinned(t, "kubernetes")
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if n, err := ClusterName(l, get); err != nil || n != "kubernetes" {
		t.Fatalf("unset: %q %v", n, err)
	}
	env[ClusterEnv] = "e2e-12345678901-kubernetes-lifecycle"
	if n, err := ClusterName(l, get); err != nil || n != env[ClusterEnv] {
		t.Fatalf("set: %q %v", n, err)
	}
	env[ClusterEnv] = "E2E_Bad"
	if _, err := ClusterName(l, get); err == nil || !strings.Contains(err.Error(), "E2E_KIND_CLUSTER=E2E_Bad: a kind cluster name is at most 45") {
		t.Fatalf("bad: %v", err)
	}
	if Network(get) != "kind" {
		t.Fatalf("default network %q", Network(get))
	}
	env[NetworkEnv] = "e2e-1-kubernetes"
	if Network(get) != "e2e-1-kubernetes" {
		t.Fatalf("job network %q", Network(get))
	}
}

// leftoverKind is a kind provider holding one cluster already; its Create stops the phase, so
// what the substrate did before creating is all there is to see.
type leftoverKind struct {
	names, calls []string
}

var errStop = errors.New("create stopped by the test")

func (k *leftoverKind) Create(name string, _ createSpec) error {
	k.calls = append(k.calls, "create "+name)
	return errStop
}
func (k *leftoverKind) List() ([]string, error)               { return k.names, nil }
func (k *leftoverKind) ExportKubeConfig(string, string) error { return nil }
func (k *leftoverKind) Delete(name, _ string) error {
	k.calls = append(k.calls, "delete "+name)
	return nil
}

// A job's cluster left by a cancelled attempt of the same job (its E2E_KIND_CLUSTER name) is
// deleted before creating; a cluster of the lane's name on a laptop is refused, as it may be a
// kept one, with the command that removes it.
func TestLeftoverOfTheSameJobIsDeletedBeforeCreating(t *testing.T) {
	l := pinned(t, "kubernetes")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	job := "e2e-42-kubernetes"
	fake := &leftoverKind{names: []string{job}}
	var log bytes.Buffer
	s, err := New(l, Options{Options: substrate.Options{WorkDir: t.TempDir(), Log: &log}, provider: fake, Cluster: job})
	if err != nil {
		t.Fatal(err)
	}
	s.ensureProvider()
	if _, err := s.bringUp(ctx); !errors.Is(err, errStop) {
		t.Fatalf("want the create reached, got %v", err)
	}
	if got := strings.Join(fake.calls, ", "); got != "delete "+job+", create "+job {
		t.Fatalf("calls: %s", got)
	}
	if !strings.Contains(log.String(), "kind: deleting cluster e2e-42-kubernetes, left by an earlier attempt of this job (E2E_KIND_CLUSTER)") {
		t.Fatalf("log:\n%s", log.String())
	}

	laptop := &leftoverKind{names: []string{"kubernetes"}}
	s, err = New(l, Options{Options: substrate.Options{WorkDir: t.TempDir()}, provider: laptop})
	if err != nil {
		t.Fatal(err)
	}
	s.ensureProvider()
	_, err = s.bringUp(ctx)
	if err == nil || !strings.Contains(err.Error(), "a kind cluster named kubernetes exists already: E2E_REUSE=1 reuses it, or remove it (bin/e2e down --lane kubernetes)") || len(laptop.calls) != 0 {
		t.Fatalf("laptop: %v, calls %v", err, laptop.calls)
	}
}
