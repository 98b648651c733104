package e2ecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/report"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// refusing is a substrate whose preflight refuses the machine, as this one is refused.
type refusing struct{}

func (refusing) Name() string { return "kind" }
func (refusing) Preflight(context.Context) error {
	return &substrate.PreflightError{Substrate: "kind", Missing: "docker: the docker daemon is not reachable"}
}
func (refusing) Down(context.Context) error { return nil }
func (refusing) Up(context.Context, *budget.Clock) (*cluster.Cluster, error) {
	return nil, nil
}

// A kind run writes the node image it creates its nodes from into run.json, with where the pin
// comes from, and into repro.json's environment, even when it stops in the preflight.
func TestAKindRunRecordsItsNodeImage(t *testing.T) {
	const override = "kindest/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5"
	t.Setenv("E2E_KIND_NODE_IMAGE", override)
	art := filepath.Join(t.TempDir(), "artifacts")
	var out bytes.Buffer
	r, err := newRun(runOptions{Lane: "kubernetes", LanesDir: "lanes", Artifacts: art, RunID: "ni1", NoBuild: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	r.newSub = func(*lane.Lane, substrate.Options) (substrate.Substrate, error) { return refusing{}, nil }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code := r.execute(ctx); code != verdict.ExitConfig {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	r.close()
	var info runInfo
	readJSON(t, filepath.Join(art, "run.json"), &info)
	if info.NodeImage == nil || info.NodeImage.Image != override ||
		info.NodeImage.Source != "E2E_KIND_NODE_IMAGE (the lane pins docker.io/kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f)" {
		t.Fatalf("run.json nodeImage %+v", info.NodeImage)
	}
	var rep report.Repro
	readJSON(t, filepath.Join(art, "repro.json"), &rep)
	if rep.Env["E2E_KIND_NODE_IMAGE"] != override {
		t.Fatalf("repro.json env %v", rep.Env)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
