package node_test

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
)

// The workload image the real-Node lanes pin is the one built here, byte for byte: its digest
// is lanes/sim-node.yaml's workload digest, under the repository the lane names.
func TestTheWorkloadImageIsTheLanesPin(t *testing.T) {
	img, err := node.WorkloadImage()
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	l, err := lane.Load(filepath.Join("..", "..", "..", "lanes", "sim-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Workload.Image != node.WorkloadRepo || l.Workload.Digest != d.String() {
		t.Errorf("lanes/sim-node.yaml pins workload %s@%s; the image built here is %s@%s: pin that",
			l.Workload.Image, l.Workload.Digest, node.WorkloadRepo, d)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.RootFS.Type != "layers" || len(cf.RootFS.DiffIDs) != 1 || strings.Join(cf.Config.Entrypoint, " ") != "/workload" {
		t.Errorf("config: rootfs %+v, entrypoint %q", cf.RootFS, cf.Config.Entrypoint)
	}
}

// The workload's program is a valid static x86-64 executable that runs until a signal ends it.
func TestTheWorkloadRunsUntilSignalled(t *testing.T) {
	img, err := node.WorkloadImage()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != "workload" || hdr.Mode != 0o755 {
		t.Fatalf("the image's first file: %+v, %v; want workload, mode 0755", hdr, err)
	}
	prog, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "workload")
	if err := os.WriteFile(bin, prog, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the workload is no ELF file: %v", err)
	}
	if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC || len(f.Progs) != 1 {
		t.Errorf("ELF machine %s, type %s, %d program headers; want x86-64, EXEC, 1", f.Machine, f.Type, len(f.Progs))
	}
	f.Close()
	cmd := exec.Command(bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the workload ended by itself: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err = <-done
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("the workload after SIGTERM: %v, want killed by SIGTERM", err)
	}
}
