// Package outside holds a suite module outside the checkout to what docs/writing-a-suite.md
// says of it ("A suite in your own repository, command by command"): written in a temporary
// folder beside a link to the checkout, it is tidied, vetted, and its lane passes lanes check
// and bin/e2e run --check with the documented commands.
package outside

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The module's files, as the page writes them: the harness is ../cozy-e2e, beside it.
var files = map[string]string{
	"go.mod": `module example.com/mysuite

go 1.25.7

require github.com/cozystack/cozy-e2e v0.0.0

replace github.com/cozystack/cozy-e2e => ../cozy-e2e

replace k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20250910181357-589584f1c912
`,
	"suite.yaml": `name: mysuite
phases:
  - name: tenant
  - name: pools
  - name: kubelets
    perPool: true
  - name: teardown
`,
	"lanes/sim-mysuite.yaml": `name: sim-mysuite
extends: ../../cozy-e2e/lanes/sim.yaml
suites:
  - name: mysuite
    path: ..
budget:
  jobCap: 14m
  phases:
    - name: kubelets
      ceiling: 20s
`,
	"kubelets.go": `// Package mysuite checks that every worker Node of a pool runs one kubelet version.
package mysuite

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/fixture"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/specs"
)

const Phase = "kubelets"

const StageOneVersion specs.Stage = "one-version"

type Input struct {
	Lifecycle specs.Lifecycle
	Pool      fixture.Pool
}

func Spec(_ context.Context, inputGetter func() Input) {
	It("every worker Node of the pool runs one kubelet version", func(spec SpecContext) {
		in := inputGetter()
		rec, r := in.Lifecycle.OnPool(spec, Phase, in.Pool)
		versions := map[string]bool{}
		for _, m := range rec.Machines {
			var node corev1.Node
			r.Must(in.Pool.Kubernetes().Client.Get(r.Ctx, client.ObjectKey{Name: m.Machine.Status.NodeRef.Name}, &node))
			versions[node.Status.NodeInfo.KubeletVersion] = true
		}
		if len(versions) > 1 {
			r.Must(r.Stages.Fail(StageOneVersion, verdict.ProductAssertion, fmt.Sprintf("kubelets at %v", versions)))
		}
		r.Stages.Pass(r.Ctx, StageOneVersion, fmt.Sprintf("%d Nodes, one kubelet version", len(rec.Machines)))
	})
}
`,
	"suite_test.go": `package mysuite

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/cozy-e2e/suite"
)

func TestMySuite(t *testing.T) {
	suite.Run(t, suite.Config{Name: "mysuite", Specs: func(w *suite.World) {
		w.JoinSpecs(context.Background())
		for _, p := range w.Tenant.Pools {
			Describe("pool "+p.Name(), func() {
				Spec(context.Background(), func() Input { return Input{Lifecycle: w.InPhase(), Pool: p} })
			})
		}
	}})
}
`,
}

// run runs a command in dir and returns its output; it fails the test unless it exits 0.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

func TestASuiteModuleOutsideTheCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: tidies and vets a module of its own, builds bin/lanes and bin/e2e")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	if strings.HasPrefix(top, root+string(filepath.Separator)) {
		t.Fatalf("the temporary folder %s is inside the checkout %s", top, root)
	}
	// The checkout beside the module, as CI checks out both.
	if err := os.Symlink(root, filepath.Join(top, "cozy-e2e")); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(top, "mysuite")
	for name, body := range files {
		p := filepath.Join(mine, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, mine, "go", "mod", "tidy")
	run(t, mine, "go", "vet", "./...")
	bin := t.TempDir()
	run(t, root, "go", "build", "-o", bin, "./cmd/lanes", "./cmd/e2e")

	// make lanes-check LANES_DIR=../mysuite/lanes, from the checkout.
	out := run(t, root, filepath.Join(bin, "lanes"), "check", "--dir", filepath.Join(top, "cozy-e2e", "..", "mysuite", "lanes"))
	if !strings.Contains(out, "sim-mysuite") || !strings.Contains(out, " ok ") {
		t.Errorf("lanes check of the module's lanes said:\n%s\nwant sim-mysuite ok", out)
	}
	// make e2e LANE=../mysuite/lanes/sim-mysuite.yaml runs this first.
	laneFile := filepath.Join(mine, "lanes", "sim-mysuite.yaml")
	out = run(t, root, filepath.Join(bin, "e2e"), "run", "--check", "--lane", laneFile)
	for _, want := range []string{"lane sim-mysuite ok", "substrate sim", "mysuite in " + mine} {
		if !strings.Contains(out, want) {
			t.Errorf("e2e run --check --lane %s said %q; want %q", laneFile, out, want)
		}
	}
	if sub := strings.TrimSpace(run(t, root, filepath.Join(bin, "e2e"), "substrate", "--lane", laneFile)); sub != "sim" {
		t.Errorf("e2e substrate --lane %s: %q; want sim (make e2e builds the tools)", laneFile, sub)
	}
}
