package e2ecmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// halfUp is a substrate whose management cluster came up but whose platform did not: Up
// hands back the cluster with its error, as the substrate contract asks.
type halfUp struct {
	c     *cluster.Cluster
	downs int
}

func (h *halfUp) Name() string                        { return "half-up" }
func (h *halfUp) Preflight(ctx context.Context) error { return nil }
func (h *halfUp) Down(ctx context.Context) error      { h.downs++; return nil }
func (h *halfUp) Up(ctx context.Context, clock *budget.Clock) (*cluster.Cluster, error) {
	_, span, err := clock.Phase(ctx, "cluster")
	if err != nil {
		return nil, err
	}
	err = errors.New("platform: HelmRelease cozy-system/cozystack-platform is not Ready: InstallFailed")
	span.End(err)
	return h.c, err
}

// A bring-up that fails half way is judged an install failure in its phase, with evidence read
// from the management cluster it left (its Warning events among it), and is torn down once.
func TestBringUpFailureReadsTheManagementClusterItLeft(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "management"})
	c, err := cluster.New("management", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const why = "Back-off pulling image ghcr.io/cozystack/cozystack/platform: 401 Unauthorized"
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "platform-pull", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "cozystack-platform-0"},
		Type:           corev1.EventTypeWarning, Reason: "Failed", Message: why,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
	}
	if _, err := c.Kube.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	art := filepath.Join(t.TempDir(), "artifacts")
	var out bytes.Buffer
	r, err := newRun(runOptions{Lane: "sim", LanesDir: "lanes", Artifacts: art, RunID: "t1", NoBuild: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	sub := &halfUp{c: c}
	r.newSub = func(*lane.Lane, substrate.Options) (substrate.Substrate, error) { return sub, nil }
	code := r.execute(ctx)
	r.close()
	if code != verdict.ExitFail {
		t.Fatalf("exit %d, want %d\n%s", code, verdict.ExitFail, out.String())
	}
	if sub.downs != 1 {
		t.Errorf("Down called %d times, want once", sub.downs)
	}
	v, err := verdict.ReadVerdict(filepath.Join(art, "verdict.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Failures) != 1 {
		t.Fatalf("failures %v, want the bring-up's alone", v.Failures)
	}
	f := v.Failures[0]
	if f.Class != verdict.Install || f.Stage != "cluster" {
		t.Errorf("%s at %s, want %s at cluster", f.Class, f.Stage, verdict.Install)
	}
	shown := false
	for _, p := range f.Evidence {
		data, err := os.ReadFile(filepath.Join(art, filepath.FromSlash(p)))
		if err == nil && strings.Contains(p, "events") && bytes.Contains(data, []byte(why)) {
			shown = true
		}
	}
	if !shown {
		t.Errorf("no events file among the evidence shows the Warning event %q; evidence: %v", why, f.Evidence)
	}
}
