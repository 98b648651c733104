package kind

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The test binary stands in for the docker CLI when it is started under the name docker, so
// kind's own code (its config validation, its provider's container arguments, its kubeadm
// config rendering and patching, its containerd config patching) runs for real on a machine
// without a docker daemon. It answers the commands kind v0.33.0's docker provider sends
// (pkg/cluster/internal/providers/docker: provider.go, provision.go, network.go, node.go,
// images.go, util.go) from a state folder, keeps what kind writes into the nodes, and stops the
// creation at the first command that needs a real node: kubeadm init.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "docker" {
		os.Exit(fakeDocker(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// Environment of the stand-in.
const (
	fakeDockerDir     = "COZY_E2E_FAKE_DOCKER_DIR"     // its state folder
	fakeKubeVersion   = "COZY_E2E_FAKE_KUBE_VERSION"   // the nodes' /kind/version
	fakeContainerdCfg = "COZY_E2E_FAKE_CONTAINERD_CFG" // the nodes' /etc/containerd/config.toml
)

// fakeContainer is a node kind created: its name, labels and docker run arguments.
type fakeContainer struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Args   []string          `json:"args"`
}

func fakeDocker(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	dir := os.Getenv(fakeDockerDir)
	if dir == "" {
		fmt.Fprintln(stderr, "fake docker: "+fakeDockerDir+" is not set")
		return 97
	}
	logCall(dir, args)
	has := func(a ...string) bool { return len(args) >= len(a) && slices.Equal(args[:len(a)], a) }
	last := func() string { return args[len(args)-1] }
	switch {
	case has("info", "--format", "{{json .}}"):
		fmt.Fprintln(stdout, `{"ServerVersion":"28.1.1","CgroupVersion":"2","CgroupDriver":"systemd","MemoryLimit":true,"PidsLimit":true,"CPUShares":true,"SecurityOptions":["name=seccomp,profile=builtin","name=cgroupns"],"DockerRootDir":"/var/lib/docker"}`)
	case has("info", "--format", "'{{json .SecurityOptions}}'"):
		fmt.Fprintln(stdout, `'["name=seccomp,profile=builtin","name=cgroupns"]'`)
	case has("info", "-f", "{{.Driver}}"):
		fmt.Fprintln(stdout, "overlay2")
	case has("info", "-f", "{{json .DriverStatus }}"):
		fmt.Fprintln(stdout, `[["Backing Filesystem","extfs"]]`)
	case has("ps"):
		return fakePs(dir, args, stdout)
	case has("inspect", "--type=image"):
		// Every node image is present: nothing is pulled.
	case has("network", "ls"):
		if strings.Contains(strings.Join(args, " "), "{{.Name}}") {
			fmt.Fprintln(stdout, "kind")
		} else {
			fmt.Fprintln(stdout, "f00dfeedf00d")
		}
	case has("network", "inspect", "-f"):
		fmt.Fprintln(stdout, "172.18.0.0/16 fc00:f853:ccd:e793::/64 ")
	case has("network", "inspect"):
		fmt.Fprintln(stdout, `[{"Id":"f00dfeedf00d","Name":"kind","Containers":{}}]`)
	case has("context", "inspect"):
		fmt.Fprintln(stdout, "")
	case has("run", "--name"):
		return fakeRun(dir, args[2], args[3:])
	case has("logs", "-f"):
		fmt.Fprintln(stdout, "Reached target Multi-User System.")
	case has("inspect", "--format") || has("inspect", "-f"):
		return fakeInspect(dir, args[2], last(), stdout)
	case has("exec"):
		return fakeExec(dir, args[1:], stdin, stdout, stderr)
	case has("rm", "-f", "-v"):
		for _, name := range args[3:] {
			_ = os.RemoveAll(filepath.Join(dir, "containers", name))
		}
	default:
		fmt.Fprintf(stderr, "fake docker: %q is not imitated\n", args)
		return 97
	}
	return 0
}

func logCall(dir string, args []string) {
	f, err := os.OpenFile(filepath.Join(dir, "calls.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	data, _ := json.Marshal(args)
	_, _ = f.Write(append(data, '\n'))
}

func containers(dir string) []fakeContainer {
	entries, _ := os.ReadDir(filepath.Join(dir, "containers"))
	var out []fakeContainer
	for _, e := range entries {
		if c, ok := container(dir, e.Name()); ok {
			out = append(out, c)
		}
	}
	return out
}

func container(dir, name string) (fakeContainer, bool) {
	var c fakeContainer
	data, err := os.ReadFile(filepath.Join(dir, "containers", name, "container.json"))
	if err != nil || json.Unmarshal(data, &c) != nil {
		return c, false
	}
	return c, true
}

// fakePs lists the nodes of a cluster (--filter label=<key>=<cluster> --format {{.Names}}) or
// the clusters (--filter label=<key> --format {{.Label "<key>"}}).
func fakePs(dir string, args []string, stdout io.Writer) int {
	var filter, format string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--filter":
			filter = strings.TrimPrefix(args[i+1], "label=")
		case "--format":
			format = args[i+1]
		}
	}
	key, value, byValue := strings.Cut(filter, "=")
	seen := map[string]bool{}
	for _, c := range containers(dir) {
		v, ok := c.Labels[key]
		if !ok || (byValue && v != value) {
			continue
		}
		out := c.Name
		if format != "{{.Names}}" {
			out = v
		}
		if !seen[out] {
			seen[out] = true
			fmt.Fprintln(stdout, out)
		}
	}
	return 0
}

func fakeRun(dir, name string, args []string) int {
	c := fakeContainer{Name: name, Labels: map[string]string{}, Args: args}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--label" {
			k, v, _ := strings.Cut(args[i+1], "=")
			c.Labels[k] = v
		}
	}
	data, _ := json.Marshal(c)
	if err := os.MkdirAll(filepath.Join(dir, "containers", name), 0o755); err != nil {
		return 1
	}
	if err := os.WriteFile(filepath.Join(dir, "containers", name, "container.json"), data, 0o644); err != nil {
		return 1
	}
	// What was run stays after kind deletes the containers.
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
		return 1
	}
	if err := os.WriteFile(filepath.Join(dir, "runs", name+".json"), data, 0o644); err != nil {
		return 1
	}
	return 0
}

func fakeInspect(dir, format, name string, stdout io.Writer) int {
	c, ok := container(dir, name)
	if !ok {
		return 1
	}
	switch {
	case strings.Contains(format, "desktop.docker.io/ports"):
		fmt.Fprintln(stdout, "")
	case strings.Contains(format, ".NetworkSettings.Ports"):
		fmt.Fprintln(stdout, "127.0.0.1\t40123")
	case strings.Contains(format, "io.x-k8s.kind.role"):
		fmt.Fprintln(stdout, c.Labels["io.x-k8s.kind.role"])
	case strings.Contains(format, ".NetworkSettings.Networks"):
		fmt.Fprintln(stdout, "172.18.0.2,fc00:f853:ccd:e793::2")
	default:
		return 97
	}
	return 0
}

// fakeExec runs a command "in a node": the files kind reads and writes, and the refusal of
// kubeadm, which only a real node can run.
func fakeExec(dir string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if args[0] == "-e" {
			args = args[1:]
		}
		args = args[1:]
	}
	if len(args) < 2 {
		return 97
	}
	node, cmd := args[0], args[1:]
	files := filepath.Join(dir, "files", node)
	switch {
	case slices.Equal(cmd, []string{"cat", "/kind/version"}):
		fmt.Fprintln(stdout, os.Getenv(fakeKubeVersion))
	case len(cmd) == 2 && cmd[0] == "cat":
		data, err := os.ReadFile(filepath.Join(files, cmd[1]))
		if err != nil && cmd[1] == "/etc/containerd/config.toml" {
			data, err = os.ReadFile(os.Getenv(fakeContainerdCfg))
		}
		if err != nil {
			fmt.Fprintf(stderr, "cat: %s: No such file or directory\n", cmd[1])
			return 1
		}
		_, _ = stdout.Write(data)
	case len(cmd) == 3 && cmd[0] == "mkdir" && cmd[1] == "-p":
	case len(cmd) == 3 && cmd[0] == "cp" && cmd[1] == "/dev/stdin":
		data, err := io.ReadAll(stdin)
		if err != nil {
			return 1
		}
		p := filepath.Join(files, cmd[2])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 1
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return 1
		}
	case cmd[0] == "bash" && strings.Contains(strings.Join(cmd, " "), "systemctl restart containerd"):
		_ = os.WriteFile(filepath.Join(files, "containerd-restarted"), nil, 0o644)
	case cmd[0] == "kubeadm":
		fmt.Fprintln(stderr, "fake docker: kubeadm needs a real node; the creation stops here")
		return 1
	default:
		fmt.Fprintf(stderr, "fake docker: exec %q is not imitated\n", cmd)
		return 97
	}
	return 0
}
