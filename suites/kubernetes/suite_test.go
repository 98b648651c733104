package kubernetes

import (
	"errors"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/cozy-e2e/suites/internal/suite"
)

// TestKubernetes runs the suite under the orchestrator, which sets the E2E_* environment.
// Run bare (go test ./...), it has no lane and no cluster and says how to run it.
func TestKubernetes(t *testing.T) {
	if !suite.Present(os.Getenv) {
		t.Skip("the kubernetes suite runs under the orchestrator: make e2e (or bin/e2e run --lane <lane>)")
	}
	env, err := suite.FromEnviron(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	s, err := suite.Setup(Name, env, Phases)
	var ce *suite.ConfigurationError
	if errors.As(err, &ce) {
		if ferr := s.Finish(); ferr != nil {
			t.Error(ferr)
		}
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	sel, err := Select(s.Lane)
	if err != nil {
		t.Fatal(err)
	}
	RegisterFailHandler(Fail)
	describe(newState(s), sel)
	RunSpecs(t, Name)
}
