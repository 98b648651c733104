package e2ecmd

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/diag"
	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/substrate/kind"
)

// leaky is a kind substrate whose preflight writes the registry login into its evidence, as a
// careless collector would.
type leaky struct{ dir, line string }

func (leaky) Name() string { return "kind" }
func (s leaky) Preflight(context.Context) error {
	_ = os.MkdirAll(filepath.Join(s.dir, "substrate"), 0o755)
	_ = os.WriteFile(filepath.Join(s.dir, "substrate", "preflight.txt"), []byte(s.line), 0o644)
	return &substrate.PreflightError{Substrate: "kind", Missing: "docker"}
}
func (leaky) Down(context.Context) error                                  { return nil }
func (leaky) Up(context.Context, *budget.Clock) (*cluster.Cluster, error) { return nil, nil }

// The platform registry's login is one of the values no artifact may hold, as the sim's canary
// is: a run whose artifacts carry it, raw or in base64, is a harness failure, and the files are
// scrubbed.
func TestTheRegistryLoginNeverStaysInTheArtifacts(t *testing.T) {
	const password = "canary-registry-token-7e21"
	t.Setenv("E2E_PLATFORM_REGISTRY", "registry.example/pr/cozystack")
	t.Setenv("E2E_PLATFORM_REGISTRY_USERNAME", "robot")
	t.Setenv("E2E_PLATFORM_REGISTRY_PASSWORD", password)
	art := filepath.Join(t.TempDir(), "artifacts")
	var out bytes.Buffer
	r, err := newRun(runOptions{Lane: "kubernetes", LanesDir: "lanes", Artifacts: art, RunID: "rl1", NoBuild: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	auth := kind.RegistryAuthFromEnv(os.Getenv)
	line := "docker login -p " + password + "\nauth " + base64.StdEncoding.EncodeToString([]byte("robot:"+password)) + "\n"
	r.newSub = func(*lane.Lane, substrate.Options) (substrate.Substrate, error) {
		return leaky{dir: art, line: line}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r.execute(ctx)
	r.close()
	v, err := verdict.ReadVerdict(filepath.Join(art, "verdict.json"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range v.Failures {
		found = found || (f.Spec == "artifacts hold no secret" && f.Class == verdict.Harness)
	}
	if !found {
		t.Fatalf("the leak was not judged: %+v", v.Failures)
	}
	if err := diag.Scan(art, auth.Secrets()...); err != nil {
		t.Fatalf("the login is still in the artifacts: %v", err)
	}
	if strings.Contains(out.String(), password) {
		t.Fatalf("the terminal shows the password:\n%s", out.String())
	}
}
