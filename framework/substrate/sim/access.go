package sim

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Describe says how to reach the management cluster and every tenant control plane.
func (s *Substrate) Describe() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return []string{"sim: nothing is running"}
	}
	lines := []string{
		"sim management cluster: " + s.w.API.URL,
		"  export KUBECONFIG=" + s.w.API.AdminKubeconfig,
		"  (through the harness proxy: " + s.kubecfg + ")",
		"  logs of etcd, kube-apiserver, controllers and kwok: " + s.w.Dir(),
	}
	if s.k != nil {
		for _, t := range s.k.Tenants() {
			lines = append(lines, fmt.Sprintf("tenant %s: %s", t.Name, t.URL), "  export KUBECONFIG="+t.Kubeconfig)
		}
	}
	return lines
}

// copyEvidence copies the sim's fault observations into Artifacts/substrate. Nothing else:
// every other file of the sim folder may hold a credential.
func (s *Substrate) copyEvidence() error {
	if s.o.Artifacts == "" || s.env.Dir == "" {
		return nil
	}
	src := s.env.ObservationsPath()
	in, err := os.Open(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	dir := filepath.Join(s.o.Artifacts, "substrate")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(dir, "faults-observed.jsonl"))
	if err != nil {
		return err
	}
	defer out.Close()
	_, err = io.Copy(out, in)
	return err
}
