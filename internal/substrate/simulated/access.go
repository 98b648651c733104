package simulated

import (
	"errors"
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

// copyEvidence copies the sim's fault observations and the guests' log (error texts the guest
// stand-in writes, never its data) into Artifacts/substrate. Nothing else: every other file of the
// sim folder may hold a credential.
func (s *Substrate) copyEvidence() error {
	if s.o.Artifacts == "" || s.env.Dir == "" {
		return nil
	}
	dir := filepath.Join(s.o.Artifacts, "substrate")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The guests' log says what a guest could not do that no console shows (a Talos kubelet's
	// failed TLS bootstrap).
	return errors.Join(copyFile(s.env.ObservationsPath(), filepath.Join(dir, "faults-observed.jsonl")),
		copyFile(s.env.GuestLogPath(), filepath.Join(dir, "guests.log")))
}

// copyFile copies src to dst; a src that does not exist copies nothing.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
