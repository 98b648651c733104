package kind

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
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
	// The kubelet's maxPods and cgroup setting, decoded by the kubelet's own configuration type,
	// the one kubeadm reads a KubeletConfiguration document into.
	kc := kubeletPatchOf(t, back.KubeadmConfigPatches)
	if kc.MaxPods != assumptions.KubeletMaxPods || kc.FailCgroupV1 == nil || *kc.FailCgroupV1 {
		t.Fatalf("KubeletConfiguration patch: maxPods %d, failCgroupV1 %v", kc.MaxPods, kc.FailCgroupV1)
	}
	if !slices.Contains(back.ContainerdConfigPatches, DeviceOwnershipPatch) {
		t.Fatalf("containerd patches %q lack %q", back.ContainerdConfigPatches, DeviceOwnershipPatch)
	}
	// v1.34 kubelets accept cgroup v1 by default: no failCgroupV1 there, maxPods still.
	prev, err := Config(pinnedAt(t, "kubernetes", "v1.34.9"), ConfigOptions{CgroupV1: true})
	if err != nil {
		t.Fatal(err)
	}
	if kc := kubeletPatchOf(t, prev.Cluster.KubeadmConfigPatches); kc.FailCgroupV1 != nil || kc.MaxPods != assumptions.KubeletMaxPods {
		t.Fatalf("a v1.34 node got maxPods %d, failCgroupV1 %v", kc.MaxPods, kc.FailCgroupV1)
	}
}

// kubeletPatchOf is the one KubeletConfiguration patch, decoded strictly by
// k8s.io/kubelet/config/v1beta1, the type kubeadm decodes it into.
func kubeletPatchOf(t *testing.T, patches []string) kubeletv1beta1.KubeletConfiguration {
	t.Helper()
	var out []kubeletv1beta1.KubeletConfiguration
	for _, p := range patches {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(p), &meta); err != nil || meta.Kind != "KubeletConfiguration" {
			continue
		}
		var kc kubeletv1beta1.KubeletConfiguration
		if err := strictDecode(p, &kc); err != nil {
			t.Fatalf("the kubelet's own type refuses the patch: %v\n%s", err, p)
		}
		if kc.APIVersion != kubeletv1beta1.SchemeGroupVersion.String() {
			t.Fatalf("KubeletConfiguration patch at %q, kind renders %s", kc.APIVersion, kubeletv1beta1.SchemeGroupVersion)
		}
		out = append(out, kc)
	}
	if len(out) != 1 {
		t.Fatalf("%d KubeletConfiguration patches, want 1: %q", len(out), patches)
	}
	return out[0]
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

// A lane whose node image digest is unknown gets no config: it refuses to invent a digest. The
// shipped lanes pin kind v0.31.0's v1.35.0 image, and an override replaces it on every node.
func TestUnpinnedNodeImageIsRefused(t *testing.T) {
	_, err := Config(unpinnedLane(t), ConfigOptions{})
	if err == nil || !strings.Contains(err.Error(), "components kind-node: the node image docker.io/kindest/node:v1.35 has no digest") {
		t.Fatalf("want the unpinned node image named, got %v", err)
	}
	cfg, err := Config(shippedLane(t, "kubernetes"), ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const shipped = "docker.io/kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f"
	if got := cfg.Cluster.Nodes[0].Image; got != shipped {
		t.Fatalf("node image %s, want %s", got, shipped)
	}
	ref, err := ParseNodeImage("registry.local:5000/kind/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5")
	if err != nil {
		t.Fatal(err)
	}
	l := unpinnedLane(t)
	l.Kind.Workers = 1
	cfg, err = Config(WithNodeImage(l, ref), ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cfg.Cluster.Nodes {
		if n.Image != ref.String() {
			t.Fatalf("node %s: image %s, want the override %s", n.Role, n.Image, ref)
		}
	}
	if laneNodeImage(l) != "docker.io/kindest/node:v1.35@unknown" {
		t.Fatalf("the lane was changed by the override: %s", laneNodeImage(l))
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
