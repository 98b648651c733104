package suiterun

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Keeps says whether the run keeps what the suite created (E2E_KEEP), and why: always with
// E2E_KEEP=1; with on-failure when the suite failed (failedNow: the spec running now failed;
// the suite's recorded failures count too).
func (s *Suite) Keeps(failedNow bool) (bool, string) {
	switch s.Env.Keep {
	case KeepAlways:
		return true, "E2E_KEEP=1"
	case KeepOnFailure:
		if failedNow || len(s.Failures.All()) > 0 {
			return true, "E2E_KEEP=on-failure and the run failed"
		}
	}
	return false, ""
}

// KeptKubeconfig writes a kubeconfig for c, named name, into the suite's private folder (never
// the artifacts: it holds a credential) and returns its path.
func (s *Suite) KeptKubeconfig(name string, c *cluster.Cluster) (string, error) {
	if s.Env.Work == "" || c == nil {
		return "", nil
	}
	if err := os.MkdirAll(s.Env.Work, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(s.Env.Work, name+".kubeconfig")
	if err := cluster.WriteKubeconfig(path, name, c.REST); err != nil {
		return "", fmt.Errorf("kubeconfig of %s: %w", name, err)
	}
	return path, nil
}

// WriteKept writes kept.json into the suite's artifacts, for the orchestrator to print.
func (s *Suite) WriteKept(k verdict.Kept) error {
	path, err := s.Env.Path(verdict.KeptFile)
	if err != nil {
		return err
	}
	return k.Write(path)
}
