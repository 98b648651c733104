package kind

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// testDigest is a stand-in node image digest for the tests; the shipped lanes pin the real one.
const testDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

func shippedLane(t *testing.T, name string) *lane.Lane {
	t.Helper()
	l, err := lane.Load(filepath.Join("..", "..", "..", "lanes", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// pinned is the shipped lane with its node image pinned, as a maintainer pins it.
func pinned(t *testing.T, name string) *lane.Lane { return pinnedAt(t, name, "v1.35.4") }

// pinnedAt is the shipped lane with its node image pinned at Kubernetes version.
func pinnedAt(t *testing.T, name, version string) *lane.Lane {
	l := shippedLane(t, name)
	for i := range l.Components {
		if l.Components[i].Name == lane.KindNodeComponent {
			l.Components[i].Version = version
			l.Components[i].Digest = testDigest
		}
	}
	return l
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(want) != string(got) {
		t.Fatalf("%s differs from what is generated (go test -update rewrites it):\n%s", path, lane.Diff(string(got), string(want)))
	}
}

// The shipped lane's node config on a cgroup v1 runner: /dev/kvm mounted, the platform's CNI in
// place of kindnet and kube-proxy, and the kubelet told not to refuse cgroup v1 (v1.35 does by
// default). kind itself must accept it.
func TestNodeConfigOfTheShippedLane(t *testing.T) {
	cfg, err := Config(pinned(t, "kubernetes"), ConfigOptions{CgroupV1: true})
	if err != nil {
		t.Fatal(err)
	}
	data, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "kind-config-kubernetes-cgroupv1.yaml", data)
	if !strings.Contains(string(data), "failCgroupV1: false") || !strings.Contains(string(data), "containerPath: /dev/kvm") {
		t.Fatalf("config lacks the cgroup patch or /dev/kvm:\n%s", data)
	}
	var back v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(data, &back); err != nil {
		t.Fatalf("kind's own types refuse the config: %v", err)
	}
	// The kubelet refuses node-role.kubernetes.io labels in --node-labels (kubelet
	// options.go:150-164 at v1.35.4): the control-plane label is set after create, never here.
	for _, n := range back.Nodes {
		for k := range n.Labels {
			if strings.HasPrefix(k, "node-role.kubernetes.io/") {
				t.Fatalf("node %s carries %s in the kind config; kubelets refuse it", n.Role, k)
			}
		}
	}
	// The cluster domain the platform and its generic install guide require: kind has no field
	// for it, so a kubeadm ClusterConfiguration patch carries it (kind applies a patch without
	// apiVersion to every kubeadm API version, resource.go:66-70 at v0.33.0).
	if got := clusterDomainPatch(t, back.KubeadmConfigPatches); got != "cozy.local" {
		t.Fatalf("networking.dnsDomain %q in the kubeadm patches, want cozy.local:\n%s", got, data)
	}
	// v1.34 kubelets accept cgroup v1 by default: no patch there.
	prev, err := Config(pinnedAt(t, "kubernetes", "v1.34.9"), ConfigOptions{CgroupV1: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(prev.Cluster.KubeadmConfigPatches) != 1 || strings.Contains(prev.Cluster.KubeadmConfigPatches[0], "failCgroupV1") {
		t.Fatalf("a v1.34 node got %v", prev.Cluster.KubeadmConfigPatches)
	}
}

// clusterDomainPatch is networking.dnsDomain of the ClusterConfiguration patch, "" if none.
func clusterDomainPatch(t *testing.T, patches []string) string {
	t.Helper()
	for _, p := range patches {
		var doc struct {
			Kind       string `json:"kind"`
			APIVersion string `json:"apiVersion"`
			Networking struct {
				DNSDomain string `json:"dnsDomain"`
			} `json:"networking"`
		}
		if err := yaml.UnmarshalStrict([]byte(p), &doc); err != nil {
			continue
		}
		if doc.Kind == "ClusterConfiguration" {
			if doc.APIVersion != "" {
				t.Fatalf("the patch pins apiVersion %s: kind would apply it to one kubeadm API version only", doc.APIVersion)
			}
			return doc.Networking.DNSDomain
		}
	}
	return ""
}

// A lane's own domain reaches both the kind config and the platform Package; a lane that
// names none gets the platform's default.
func TestClusterDomainFollowsTheLane(t *testing.T) {
	l := pinned(t, "kubernetes")
	l.Kind.Networking.DNSDomain = "e2e.example"
	cfg, err := Config(l, ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := clusterDomainPatch(t, cfg.Cluster.KubeadmConfigPatches); got != "e2e.example" {
		t.Fatalf("dnsDomain %q", got)
	}
	l.Kind.Networking.DNSDomain = ""
	cfg, err = Config(l, ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := clusterDomainPatch(t, cfg.Cluster.KubeadmConfigPatches); got != "cozy.local" {
		t.Fatalf("default dnsDomain %q", got)
	}
}

// Registry mirrors become containerd hosts files mounted into every node, port mappings and
// workers come from the lane, and an emulation lane mounts no /dev/kvm.
func TestNodeConfigWithMirrorsPortsAndWorkers(t *testing.T) {
	l := pinned(t, "kubernetes")
	l.Kind.Workers = 1
	l.Kind.RegistryMirrors = map[string][]string{
		"docker.io": {"http://mirror.local:5000"},
		"ghcr.io":   {"http://ghcr-mirror.local:5001", "https://ghcr-cache.example.org"},
	}
	l.Kind.PortMappings = []lane.KindPortMapping{{ContainerPort: 30080, HostPort: 8080, ListenAddress: "127.0.0.1"}}
	cfg, err := Config(l, ConfigOptions{CgroupV1: false, HostsDir: "/run/cozy-e2e/containerd-hosts"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "kind-config-mirrors-ports-workers.yaml", data)
	var hosts strings.Builder
	for _, name := range cfg.HostsFileNames() {
		hosts.WriteString("# " + name + "\n" + cfg.HostsFiles[name] + "\n")
	}
	golden(t, "containerd-hosts.toml", []byte(hosts.String()))

	l.Kind.Emulation = true
	l.Kind.RegistryMirrors = nil
	emu, err := Config(l, ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range emu.Cluster.Nodes {
		if len(n.ExtraMounts) != 0 {
			t.Fatalf("an emulation lane mounts %v", n.ExtraMounts)
		}
	}
	if _, err := Config(pinned(t, "kubernetes"), ConfigOptions{}); err != nil {
		t.Fatal(err)
	}
	l.Kind.RegistryMirrors = map[string][]string{"docker.io": {"http://m"}}
	if _, err := Config(l, ConfigOptions{}); err == nil {
		t.Fatal("mirrors without a hosts folder accepted")
	}
}

// The shipped lanes do not pin the node image digest yet: the config refuses to invent one.
func TestUnpinnedNodeImageIsRefused(t *testing.T) {
	_, err := Config(shippedLane(t, "kubernetes"), ConfigOptions{})
	if err == nil || !strings.Contains(err.Error(), "components kind-node: the node image docker.io/kindest/node:v1.35 has no digest") {
		t.Fatalf("want the unpinned node image named, got %v", err)
	}
}

func BenchmarkNodeConfig(b *testing.B) {
	l, err := lane.Load(filepath.Join("..", "..", "..", "lanes", "kubernetes.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for i := range l.Components {
		if l.Components[i].Name == lane.KindNodeComponent {
			l.Components[i].Digest = testDigest
		}
	}
	for i := 0; i < b.N; i++ {
		cfg, err := Config(l, ConfigOptions{CgroupV1: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cfg.YAML(); err != nil {
			b.Fatal(err)
		}
	}
}
