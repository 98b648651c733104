package simulated_test

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
)

// This machine's /proc/cgroups: cgroup v1 in hybrid mode, every controller enabled.
const procCgroupsV1 = `#subsys_name	hierarchy	num_cgroups	enabled
cpuset	2	1	1
cpu	3	1	1
cpuacct	3	1	1
blkio	4	1	1
memory	5	1	1
devices	6	1	1
freezer	7	1	1
pids	9	1	1
`

// fakeHost is a machine with the Debian binaries bins, the files files and the node's tools
// (toolsErr nil) and images (the same error) built or not.
func fakeHost(euid int, bins map[string]bool, files map[string]string, toolsErr error) simulated.NodeHost {
	return simulated.NodeHost{
		LookPath: func(f string) (string, error) {
			if bins[f] {
				return "/usr/bin/" + f, nil
			}
			return "", errors.New("not found")
		},
		Stat: func(p string) (os.FileInfo, error) {
			if _, ok := files[p]; ok {
				return nil, nil
			}
			return nil, fs.ErrNotExist
		},
		ReadFile: func(p string) ([]byte, error) {
			if c, ok := files[p]; ok {
				return []byte(c), nil
			}
			return nil, fs.ErrNotExist
		},
		Euid:      func() int { return euid },
		NodeTools: func() error { return toolsErr },
		NodeImages: func() error {
			if toolsErr != nil {
				return errors.New("the real node's images are missing in /y: oci/virt-launcher/index.json; run `make node-images`")
			}
			return nil
		},
	}
}

func cniFiles(extra map[string]string) map[string]string {
	m := map[string]string{}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		m["/usr/lib/cni/"+p] = ""
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// A bare machine: the preflight names every missing piece, and one apt-get command that installs
// every Debian package among them.
func TestNodePreflightNamesEveryMissingPiece(t *testing.T) {
	toolsErr := errors.New("the real node's binaries are missing in /x: kubelet, pause; run `make node-tools`")
	err := simulated.NodePreflight(fakeHost(1000, nil, map[string]string{"/proc/cgroups": "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t3\t1\t0\n"}, toolsErr))
	var pe *substrate.PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *substrate.PreflightError, got %T %v", err, err)
	}
	msg := err.Error()
	for _, want := range []string{
		"preflight (sim-node): root:",
		"containerd: not in PATH", "runc: not in PATH",
		"the CNI plugins bridge, host-local, loopback, portmap: not in /usr/lib/cni",
		"cgroup controllers cpu, cpuacct, memory, pids, devices, freezer: not enabled",
		"gcc:", "run `make node-tools`", "mmdebstrap: make node-images builds the images' roots with it", "run `make node-images`",
		"apt-get update && apt-get install -y containerd runc containernetworking-plugins gcc libc6-dev mmdebstrap libcap2-bin",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the preflight error lacks %q:\n%s", want, msg)
		}
	}
}

// A machine with everything (this machine's cgroup v1 hybrid, or cgroup v2 alone): no error.
// Built node tools need no gcc.
func TestNodePreflightPassesAReadyMachine(t *testing.T) {
	bins := map[string]bool{"containerd": true, "runc": true}
	for name, files := range map[string]map[string]string{
		"cgroup v1": cniFiles(map[string]string{"/proc/cgroups": procCgroupsV1}),
		"cgroup v2": cniFiles(map[string]string{"/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n"}),
	} {
		if err := simulated.NodePreflight(fakeHost(0, bins, files, nil)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// One piece missing: only it is named, with only its package.
	err := simulated.NodePreflight(fakeHost(0, map[string]bool{"containerd": true}, cniFiles(map[string]string{"/proc/cgroups": procCgroupsV1}), nil))
	if err == nil || !strings.Contains(err.Error(), "runc: not in PATH") || !strings.HasSuffix(err.Error(), "apt-get install -y runc") {
		t.Errorf("runc missing: got %v", err)
	}
}
