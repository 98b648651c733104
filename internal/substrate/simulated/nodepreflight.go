package simulated

import (
	"os"
	"os/exec"
	"strings"

	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// NodeHost is how the real node's preflight looks at the machine; tests replace its probes.
type NodeHost struct {
	LookPath func(file string) (string, error)
	Stat     func(path string) (os.FileInfo, error)
	ReadFile func(path string) ([]byte, error)
	Euid     func() int
	// NodeTools finds the kubelet and pause hack/tools/build-node.sh builds.
	NodeTools func() error
	// NodeImages finds the images hack/tools/build-images.sh builds.
	NodeImages func() error
}

// ThisHost probes this machine.
func ThisHost() NodeHost {
	return NodeHost{
		LookPath: exec.LookPath, Stat: os.Stat, ReadFile: os.ReadFile, Euid: os.Geteuid,
		NodeTools:  func() error { _, err := node.FindTools(); return err },
		NodeImages: func() error { _, err := node.FindImages(); return err },
	}
}

// cniPlugins are the CNI plugins the node's network configuration names (internal/sim/node),
// where Debian's containernetworking-plugins installs them.
var cniPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

// cgroupControllers are the controllers the kubelet's cgroupfs driver and runc need mounted.
var cgroupControllers = []string{"cpu", "cpuacct", "memory", "pids", "devices", "freezer"}

// NodePreflight names every piece the sim's real Node needs that this machine lacks (root,
// containerd, runc, the CNI plugins, the cgroup controllers, the node's own kubelet and pause),
// with the one `apt-get install` command that installs the Debian packages among them; nil when
// nothing is missing. The run exits 2 on it.
func NodePreflight(h NodeHost) error {
	var missing, pkgs []string
	if h.Euid() != 0 {
		missing = append(missing, "root: the real node runs containerd, runc and the kubelet, which need root (run as root, as CI does)")
	}
	for _, bin := range []string{"containerd", "runc"} {
		if _, err := h.LookPath(bin); err != nil {
			missing = append(missing, bin+": not in PATH")
			pkgs = append(pkgs, bin)
		}
	}
	var plugins []string
	for _, p := range cniPlugins {
		if _, err := h.Stat(node.CNIBinDir + "/" + p); err != nil {
			plugins = append(plugins, p)
		}
	}
	if len(plugins) > 0 {
		missing = append(missing, "the CNI plugins "+strings.Join(plugins, ", ")+": not in "+node.CNIBinDir)
		pkgs = append(pkgs, "containernetworking-plugins")
	}
	if m := missingCgroups(h); m != "" {
		missing = append(missing, m)
	}
	if err := h.NodeTools(); err != nil {
		if _, gerr := h.LookPath("gcc"); gerr != nil {
			missing = append(missing, "gcc: pause is C, compiled static")
			pkgs = append(pkgs, "gcc", "libc6-dev")
		}
		missing = append(missing, err.Error())
	}
	if err := h.NodeImages(); err != nil {
		for _, bin := range []struct{ name, pkg string }{{"mmdebstrap", "mmdebstrap"}, {"setcap", "libcap2-bin"}} {
			if _, lerr := h.LookPath(bin.name); lerr != nil {
				missing = append(missing, bin.name+": make node-images builds the images' roots with it")
				pkgs = append(pkgs, bin.pkg)
			}
		}
		missing = append(missing, err.Error())
	}
	if len(missing) == 0 {
		return nil
	}
	hint := ""
	if len(pkgs) > 0 {
		hint = "install the Debian packages: apt-get update && apt-get install -y " + strings.Join(pkgs, " ")
	}
	return &substrate.PreflightError{Substrate: "sim-node", Missing: strings.Join(missing, "; "), Hint: hint}
}

// missingCgroups says which cgroup controllers are not enabled (/proc/cgroups), or "" when all
// are. cgroup v2 alone (no v1 hierarchy) passes when its cgroup.controllers lists them.
func missingCgroups(h NodeHost) string {
	enabled := map[string]bool{}
	if data, err := h.ReadFile("/proc/cgroups"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) == 4 && f[3] == "1" {
				enabled[f[0]] = true
			}
		}
	}
	if data, err := h.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		for _, c := range strings.Fields(string(data)) {
			enabled[c] = true
			if c == "cpu" {
				enabled["cpuacct"] = true // v2's cpu controller accounts too
			}
		}
		enabled["devices"], enabled["freezer"] = true, true // v2 has them built in
	}
	var off []string
	for _, c := range cgroupControllers {
		if !enabled[c] {
			off = append(off, c)
		}
	}
	if len(off) == 0 {
		return ""
	}
	return "cgroup controllers " + strings.Join(off, ", ") + ": not enabled (/proc/cgroups); the kubelet and runc need them mounted under /sys/fs/cgroup"
}
