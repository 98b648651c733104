package node

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Stop stops the kubelet and kube-proxy, every container this node's containerd ran (runc's
// state is under the run folder), containerd and its shims, the node's PID namespace (with what
// is left in it), unmounts what they left under the run folder and the kubelet's root (root file
// systems, shm, network namespaces, volumes), removes kube-proxy's rules and the node's bridge,
// so the host is as it was. Idempotent.
func (n *Node) Stop() {
	if n.kubelet != nil {
		n.kubelet.stop(10 * time.Second)
	}
	if n.kubeProxy != nil {
		n.kubeProxy.stop(10 * time.Second)
	}
	n.deleteContainers()
	if n.containerd != nil {
		n.containerd.stop(10 * time.Second)
	}
	n.killShims()
	n.stopInit()
	n.unmountAll()
	n.releaseHost()
	n.removeHostLeftovers()
	if _, err := os.Stat("/sys/class/net/" + n.bridge); err == nil {
		if out, err := exec.Command("ip", "link", "delete", n.bridge).CombinedOutput(); err != nil {
			fmt.Fprintf(n.log, "node: removing the bridge %s: %v: %s\n", n.bridge, err, out)
		}
	}
}

// deleteContainers kills and deletes every container in each namespace's runc root. runc runs
// in the node's namespaces: its state names each container's process by its pid there.
func (n *Node) deleteContainers() {
	roots, _ := filepath.Glob(filepath.Join(n.l.runcRoot(), "*"))
	for _, root := range roots {
		out, err := n.inNode("runc", "--root", root, "list", "-q")
		if err != nil {
			fmt.Fprintf(n.log, "node: listing the containers of %s: %v: %s\n", root, err, out)
			continue
		}
		for _, id := range strings.Fields(string(out)) {
			if out, err := n.inNode("runc", "--root", root, "delete", "--force", id); err != nil {
				fmt.Fprintf(n.log, "node: deleting container %s: %v: %s\n", id, err, out)
			}
		}
	}
}

// killShims kills the containerd shims that serve this node's containerd (their command line
// names its socket).
func (n *Node) killShims() {
	for _, pid := range processesWith([]byte(n.l.socket())) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// processesWith are the processes whose command line contains needle.
func processesWith(needle []byte) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(d + "/cmdline")
		if err == nil && bytes.Contains(cmdline, needle) {
			out = append(out, pid)
		}
	}
	return out
}

// unmountAll detaches every mount under the run folder, the deepest first.
func (n *Node) unmountAll() { unmountUnder(filepath.Clean(n.l.dir)+"/", n.log) }

// unmountUnder detaches every mount whose mount point starts with prefix, the deepest first.
func unmountUnder(prefix string, log io.Writer) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if strings.HasPrefix(mp, prefix) {
			mounts = append(mounts, mp)
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			fmt.Fprintf(log, "node: unmounting %s: %v\n", mounts[i], err)
		}
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// hostPaths are the folders outside the run folder the kubelet and containerd make: the
// kubelet's links to container logs (a fixed /var/log/containers), the folder of its device
// plugin registration socket (fixed whatever its root: k8s.io/kubelet v0.35.4
// pkg/apis/deviceplugin/v1beta1/constants.go:30-32) and its parent, and containerd's parent
// cgroup of its k8s.io namespace in each hierarchy. Children come before their parents.
func hostPaths() []string {
	paths, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	return append(paths, "/var/log/containers", devicePluginDir, filepath.Dir(devicePluginDir))
}

// devicePluginDir is where the kubelet serves its device plugin registration socket.
const devicePluginDir = "/var/lib/kubelet/device-plugins"

// existing are those of paths present now.
func existing(paths []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out[p] = true
		}
	}
	return out
}

// removeHostLeftovers removes the kubelet's log links into the run folder and its registration
// socket in a device plugin folder it made, then each host folder this node made (not there at
// Start) once it is empty; one still in use stays.
func (n *Node) removeHostLeftovers() {
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, filepath.Clean(n.l.dir)+"/") {
			_ = os.Remove(l)
		}
	}
	if !n.hostBefore[devicePluginDir] {
		_ = os.Remove(filepath.Join(devicePluginDir, "kubelet.sock"))
	}
	for _, p := range hostPaths() {
		if !n.hostBefore[p] {
			_ = os.Remove(p) // rmdir: fails, and keeps it, when it is not empty
		}
	}
}

// inNode runs a command in the node's PID and mount namespaces (on the host when its init is
// gone) and returns its combined output.
func (n *Node) inNode(name string, args ...string) ([]byte, error) {
	if n.init == nil {
		return exec.Command(name, args...).CombinedOutput()
	}
	var out bytes.Buffer
	cmd := commandIn(n.mntns(), name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := startIn(cmd, n.pidns()); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return out.Bytes(), err
}
