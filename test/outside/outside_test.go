// Package outside holds a suite module outside the checkout to what docs/writing-a-suite.md
// says of it ("A suite in your own repository, command by command"): written in a temporary
// folder beside a link to the checkout, it is tidied, vetted, its lane passes lanes check and
// bin/e2e run --check, and a sim run of it is green with the documented command, its spec run
// and the check it skips shown with its reason.
package outside

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/report"
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
pools:
  - name: md0
    class: talos
    replicas: 1
suites:
  - name: mysuite
    path: ..
budget:
  jobCap: 14m
  phases:
    - name: kubelets
      ceiling: 20s
    - name: refusals
      drop: true
`,
	"kubelets.go": `// Package mysuite checks that every worker Node runs its cluster's Kubernetes minor.
package mysuite

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

const Phase = "kubelets"

const StageMinor suiterun.Stage = "kubelet-minor"

type Input struct {
	Lifecycle suiterun.Lifecycle
	Pool      join.Pool
}

func Spec(_ context.Context, inputGetter func() Input) {
	It("every worker Node runs its cluster's Kubernetes minor", func(spec SpecContext) {
		in := inputGetter()
		rec, r := in.Lifecycle.OnPool(spec, Phase, in.Pool)
		minor := in.Pool.App.Release.Version
		var wrong []string
		for _, m := range rec.Machines {
			var node corev1.Node
			r.Must(in.Pool.Kubernetes().Client.Get(r.Ctx, client.ObjectKey{Name: m.Machine.Status.NodeRef.Name}, &node))
			if v := node.Status.NodeInfo.KubeletVersion; !strings.HasPrefix(v, minor+".") {
				wrong = append(wrong, fmt.Sprintf("Node %s runs kubelet %s", node.Name, v))
			}
			if _, ok := node.Labels[corev1.LabelInstanceTypeStable]; !ok {
				r.SkipCheck("instance-type label", "Node "+node.Name+" has no "+corev1.LabelInstanceTypeStable+" label: no cloud provider set one")
			}
		}
		if len(wrong) > 0 {
			r.Must(r.Stages.Fail(StageMinor, verdict.ProductAssertion, strings.Join(wrong, "; ")+", not "+minor))
		}
		r.Stages.Pass(r.Ctx, StageMinor, fmt.Sprintf("%d Nodes at %s", len(rec.Machines), minor))
	})
}
`,
	"suite_test.go": `package mysuite

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

func TestMySuite(t *testing.T) {
	suiterun.Run(t, suiterun.Config{Name: "mysuite", Specs: func(w *suiterun.World) {
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
		t.Skip("-short: tidies and vets a module of its own, builds bin/lanes and bin/e2e, runs its lane on the sim")
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
	if t.Failed() {
		return
	}
	greenRun(t, root, filepath.Join(bin, "e2e"), laneFile)
}

// greenRun is make e2e LANE=../mysuite/lanes/sim-mysuite.yaml once the tools are built (make
// test builds them first): bin/e2e run --lane <the file>, from the checkout. The run is green,
// the suite's own spec ran and passed on the lane's pool, and the check it skipped shows as
// skipped with its reason in the verdict, the console, junit.xml and summary.md.
func greenRun(t *testing.T, root, e2e, laneFile string) {
	if _, err := controlplane.FindTools(); err != nil {
		t.Fatalf("the green run needs the control plane's tools: %v", err)
	}
	art := filepath.Join(t.TempDir(), "artifacts")
	cmd := exec.Command(e2e, "run", "--lane", laneFile)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "E2E_ARTIFACTS="+art, "E2E_SIM_FAULT=", "E2E_KEEP=", "E2E_REUSE=")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("bin/e2e run --lane %s: %s, and it printed:\n%s", laneFile, time.Since(start).Round(time.Second), out)
	v, verr := verdict.ReadVerdict(filepath.Join(art, "verdict.json"))
	if verr != nil {
		t.Fatalf("no verdict (%v): %v\n%s", err, verr, out)
	}
	if v.Result != verdict.Pass || err != nil {
		t.Fatalf("the green run: %s (%v): %s\n%s", v.Result, err, v.Reason, out)
	}
	const spec = "mysuite pool md0 every worker Node runs its cluster's Kubernetes minor"
	j, jerr := report.ReadJUnit(filepath.Join(art, "suites", "mysuite", "junit.xml"))
	if jerr != nil {
		t.Fatal(jerr)
	}
	ran := false
	for _, s := range j.Suites {
		for _, c := range s.Cases {
			if strings.HasPrefix(c.Name, "[It] "+spec) {
				ran = c.Status == "passed" && c.Failure == nil && c.Skipped == nil
			}
		}
	}
	if !ran {
		t.Errorf("the suite's junit.xml has no passed case %q:\n%+v", spec, j)
	}
	tm, terr := budget.ReadTimings(filepath.Join(art, "timings.json"))
	if terr != nil {
		t.Fatal(terr)
	}
	stage := false
	for _, s := range tm.Stages {
		stage = stage || (s.Pool == "md0" && s.Stage == "kubelet-minor")
	}
	if !stage {
		t.Errorf("timings.json has no stage kubelet-minor of pool md0: %+v", tm.Stages)
	}
	want := verdict.Skip{Spec: spec, Pool: "md0", Check: "instance-type label"}
	var got *verdict.Skip
	for i, s := range v.Skipped {
		if s.Spec == want.Spec && s.Pool == want.Pool && s.Check == want.Check {
			got = &v.Skipped[i]
		}
	}
	if got == nil || !strings.Contains(got.Reason, "has no node.kubernetes.io/instance-type label") {
		t.Fatalf("the verdict's skipped checks %+v lack %s with its reason", v.Skipped, want.Line())
	}
	for file, text := range map[string]string{"the console": string(out), "junit.xml": read(t, art, "junit.xml"), "summary.md": read(t, art, "summary.md")} {
		if !strings.Contains(text, got.Reason) {
			t.Errorf("%s does not show the skipped check's reason %q", file, got.Reason)
		}
	}
	if !strings.Contains(string(out), "SKIP "+got.Line()) {
		t.Errorf("the console does not say %q:\n%s", "SKIP "+got.Line(), out)
	}
}

func read(t *testing.T, dir, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
