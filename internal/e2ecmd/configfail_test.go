package e2ecmd

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// misconfigured is a substrate whose bring-up finds the lane wrong (a disabled Package the
// platform needed): the error is the lane's, not the product's.
type misconfigured struct{}

func (misconfigured) Name() string                    { return "misconfigured" }
func (misconfigured) Preflight(context.Context) error { return nil }
func (misconfigured) Down(context.Context) error      { return nil }
func (misconfigured) Up(ctx context.Context, clock *budget.Clock) (*cluster.Cluster, error) {
	_, span, err := clock.Phase(ctx, "cluster")
	if err != nil {
		return nil, err
	}
	err = &substrate.ConfigurationError{Err: errors.New("Package cozystack.kubevirt-cdi is Ready=False and gets no HelmRelease: cozystack.seaweedfs-application is disabled by the lane")}
	span.End(err)
	return nil, err
}

// A bring-up stopped by a configuration error is judged class configuration and exits 2.
func TestBringUpConfigurationErrorExitsTwo(t *testing.T) {
	art := filepath.Join(t.TempDir(), "artifacts")
	var out bytes.Buffer
	r, err := newRun(runOptions{Lane: "sim", LanesDir: "lanes", Artifacts: art, RunID: "t2", NoBuild: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	r.newSub = func(*lane.Lane, substrate.Options) (substrate.Substrate, error) { return misconfigured{}, nil }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := r.execute(ctx)
	r.close()
	if code != verdict.ExitConfig {
		t.Fatalf("exit %d, want %d\n%s", code, verdict.ExitConfig, out.String())
	}
	v, err := verdict.ReadVerdict(filepath.Join(art, "verdict.json"))
	if err != nil || len(v.Failures) != 1 || v.Failures[0].Class != verdict.Configuration {
		t.Fatalf("verdict %+v %v", v.Failures, err)
	}
}
