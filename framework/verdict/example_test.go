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
