package verdict_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// A tool reads a run's verdict.json: the result, the exit code, and each failure with its
// class and stage.
func ExampleReadVerdict() {
	dir, _ := os.MkdirTemp("", "verdict")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "verdict.json")
	v := verdict.Decide(verdict.Input{Lane: "sim-nodelabels", Failures: []verdict.Failure{
		{Spec: "nodelabels pool md0", Pool: "md0", Class: verdict.ProductAssertion, Stage: "labelled", Message: "Node w1 has no label kubernetes.io/hostname"}}})
	if err := v.Write(path); err != nil {
		fmt.Println(err)
		return
	}

	got, err := verdict.ReadVerdict(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got.Lane, got.Result, got.ExitCode)
	for _, f := range got.Failures {
		fmt.Println(f.Pool, f.Class, f.Stage)
	}
	// Output:
	// sim-nodelabels fail 1
	// md0 product-assertion labelled
}

// A check a spec could not judge is skipped with its reason (suiterun.SkipCheck): the run still
// passes, and the verdict lists the check with why it was skipped.
func ExampleSkip() {
	v := verdict.Decide(verdict.Input{Lane: "sim-mysuite", Skipped: []verdict.Skip{
		{Spec: "mysuite pool md0 every Node runs its cluster's kubelet minor", Pool: "md0", Check: "instance-type label",
			Reason: "Node w1 has no node.kubernetes.io/instance-type label: no cloud provider set it"}}})
	fmt.Println(v.Result, v.ExitCode, v.Counts.Skipped)
	for _, s := range v.Skipped {
		fmt.Println(s.Line())
	}
	// Output:
	// pass 0 1
	// pool md0: check instance-type label skipped: Node w1 has no node.kubernetes.io/instance-type label: no cloud provider set it
}
