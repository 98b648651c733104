package kind

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeadmv1beta3 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/types/upstreamv1beta3"
	kubeadmv1beta4 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/types/upstreamv1beta4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// kindCreation is what kind did with a node config up to kubeadm init: the docker run
// arguments of each node, and the files it wrote into each (kubeadm.conf, the patched
// containerd config).
type kindCreation struct {
	err   error
	runs  map[string]fakeContainer
	files func(node, path string) string
}

// createWithKind hands cfg to kind's own provider, as the substrate does (kindProvider.Create),
// with the docker CLI stood in by this test binary, and the node image's /kind/version and
// containerd config those of the image the lane pins: kind v0.31.0's base image config, which
// kind v0.33.0's module carries unchanged (images/base/files/etc/containerd/config.toml).
func createWithKind(t *testing.T, name string, cfg *NodeConfig, kubeVersion string) kindCreation {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(bin, "docker")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(fakeDockerDir, dir)
	t.Setenv(fakeKubeVersion, kubeVersion)
	t.Setenv(fakeContainerdCfg, kindModuleFile(t, "images/base/files/etc/containerd/config.toml"))
	p := kindProvider{p: kindcluster.NewProvider(kindcluster.ProviderWithDocker())}
	c := kindCreation{runs: map[string]fakeContainer{}}
	c.err = p.Create(name, createSpec{Config: cfg.Cluster, Kubeconfig: filepath.Join(t.TempDir(), "kubeconfig"), WaitForReady: 0})
	entries, _ := os.ReadDir(filepath.Join(dir, "runs"))
	for _, e := range entries {
		var fc fakeContainer
		data, _ := os.ReadFile(filepath.Join(dir, "runs", e.Name()))
		if json.Unmarshal(data, &fc) == nil {
			c.runs[fc.Name] = fc
		}
	}
	c.files = func(node, path string) string {
		data, err := os.ReadFile(filepath.Join(dir, "files", node, path))
		if err != nil {
			calls, _ := os.ReadFile(filepath.Join(dir, "calls.jsonl"))
			t.Fatalf("kind wrote no %s into %s (%v); docker calls:\n%s", path, node, err, calls)
		}
		return string(data)
	}
	return c
}

// kindModuleFile is a file of the sigs.k8s.io/kind module the project requires.
func kindModuleFile(t *testing.T, rel string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kind").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/kind: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// kubeadmDocs splits kind's rendered kubeadm.conf into its documents by kind.
func kubeadmDocs(t *testing.T, conf string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, doc := range strings.Split(conf, "\n---\n") {
		var meta struct {
			Kind       string `json:"kind"`
			APIVersion string `json:"apiVersion"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind == "" {
			continue
		}
		if _, dup := out[meta.Kind]; dup {
			t.Fatalf("kubeadm.conf holds two %s documents", meta.Kind)
		}
		out[meta.Kind] = doc
	}
	return out
}

// The shipped lane's node config goes through kind's own code as far as it goes without a
// node: kind validates it, runs each node container with /dev/kvm mounted from the pinned
// image, renders kubeadm's configuration with the harness's patches applied by its own patch
// code, and merges the containerd patches into the node image's own config. The results are
// decoded by the types that read them on the node: kubeadm's v1beta3 documents (kind renders
// v1beta3 below Kubernetes v1.36.0) by Cluster API's mirror of kubeadm's types (k/k itself
// cannot be imported), the KubeletConfiguration by the kubelet's own type, strictly, and the
// containerd config as TOML at the CRI plugin path of its version 2.
func TestKindAcceptsAndRendersTheNodeConfig(t *testing.T) {
	// The shipped pin (v1.35.0: kubeadm v1beta3) and an override kind renders v1beta4 for.
	override, err := ParseNodeImage("kindest/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, version, kubeadm string
		override               *NodeImageRef
	}{
		{"the lane's pin", "v1.35.0", "kubeadm.k8s.io/v1beta3", nil},
		{"E2E_KIND_NODE_IMAGE v1.36.1", "v1.36.1", "kubeadm.k8s.io/v1beta4", &override},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := shippedLane(t, "kubernetes")
			if tc.override != nil {
				l = WithNodeImage(l, *tc.override)
			}
			l.Kind.Workers = 1
			l.Kind.RegistryMirrors = map[string][]string{"docker.io": {"http://mirror.local:5000"}}
			creds, err := testAuth().writeKubeletDockerConfig(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Config(l, ConfigOptions{CgroupV1: true, HostsDir: t.TempDir(), KubeletDockerConfig: creds})
			if err != nil {
				t.Fatal(err)
			}
			image, _, _ := NodeImage(l)
			c := createWithKind(t, l.Name, cfg, tc.version)
			if c.err == nil || !strings.Contains(c.err.Error(), "failed to init node with kubeadm") {
				t.Fatalf("kind did not get as far as kubeadm init: %v", c.err)
			}
			for _, node := range []string{l.Name + "-control-plane", l.Name + "-worker"} {
				checkNode(t, c, node, image, tc.kubeadm)
				// The registry login, where the kubelet reads one, read-only.
				if args := strings.Join(c.runs[node].Args, " "); !strings.Contains(args, "--volume="+creds+":"+assumptions.KubeletDockerConfig+":ro") {
					t.Errorf("%s: the registry login is not mounted: docker run %s", node, args)
				}
			}
		})
	}
}

// checkNode holds one node's docker run arguments, kubeadm.conf and containerd config to what
// the harness asked of kind.
func checkNode(t *testing.T, c kindCreation, node, image, kubeadmVersion string) {
	t.Helper()
	run, ok := c.runs[node]
	if !ok {
		t.Fatalf("kind ran no container %s (ran %v)", node, keys(c.runs))
	}
	args := strings.Join(run.Args, " ")
	if !strings.HasSuffix(args, " "+image) || !strings.Contains(args, "--volume=/dev/kvm:/dev/kvm") ||
		!strings.Contains(args, ":"+ContainerdCertsDir+":ro") {
		t.Errorf("%s: docker run %s", node, args)
	}

	docs := kubeadmDocs(t, c.files(node, "/kind/kubeadm.conf"))
	var dnsDomain string
	switch kubeadmVersion {
	case "kubeadm.k8s.io/v1beta3":
		var cc kubeadmv1beta3.ClusterConfiguration
		if err := strictDecode(docs["ClusterConfiguration"], &cc); err != nil {
			t.Fatalf("%s: kubeadm's v1beta3 ClusterConfiguration refuses kind's rendering: %v", node, err)
		}
		dnsDomain = cc.Networking.DNSDomain
		for kind, into := range map[string]runtime.Object{"InitConfiguration": &kubeadmv1beta3.InitConfiguration{}, "JoinConfiguration": &kubeadmv1beta3.JoinConfiguration{}} {
			if err := strictDecode(docs[kind], into); err != nil {
				t.Errorf("%s: kubeadm's v1beta3 %s refuses kind's rendering: %v", node, kind, err)
			}
		}
	case "kubeadm.k8s.io/v1beta4":
		var cc kubeadmv1beta4.ClusterConfiguration
		if err := strictDecode(docs["ClusterConfiguration"], &cc); err != nil {
			t.Fatalf("%s: kubeadm's v1beta4 ClusterConfiguration refuses kind's rendering: %v", node, err)
		}
		dnsDomain = cc.Networking.DNSDomain
		for kind, into := range map[string]runtime.Object{"InitConfiguration": &kubeadmv1beta4.InitConfiguration{}, "JoinConfiguration": &kubeadmv1beta4.JoinConfiguration{}} {
			if err := strictDecode(docs[kind], into); err != nil {
				t.Errorf("%s: kubeadm's v1beta4 %s refuses kind's rendering: %v", node, kind, err)
			}
		}
	}
	if dnsDomain != "cozy.local" {
		t.Errorf("%s: ClusterConfiguration %s dnsDomain %q", node, kubeadmVersion, dnsDomain)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := strictDecode(docs["KubeletConfiguration"], &kc); err != nil {
		t.Fatalf("%s: the kubelet's KubeletConfiguration refuses kind's rendering: %v", node, err)
	}
	if kc.MaxPods != assumptions.KubeletMaxPods || kc.FailCgroupV1 == nil || *kc.FailCgroupV1 || kc.CgroupDriver != "systemd" {
		t.Errorf("%s: kubelet maxPods %d, failCgroupV1 %v, cgroupDriver %q", node, kc.MaxPods, kc.FailCgroupV1, kc.CgroupDriver)
	}

	// The TOML library containerd v2.2.0 reads its config with
	// (cmd/containerd/server/config/config.go:37).
	var ctd map[string]any
	if err := toml.Unmarshal([]byte(c.files(node, "/etc/containerd/config.toml")), &ctd); err != nil {
		t.Fatalf("%s: the patched containerd config is not TOML: %v", node, err)
	}
	cri := dig(ctd, "plugins", "io.containerd.grpc.v1.cri")
	if ctd["version"] != int64(2) || cri == nil || cri[assumptions.DeviceOwnershipKey] != true {
		t.Errorf("%s: containerd config version %v, CRI plugin %v", node, ctd["version"], cri)
	}
	if reg := dig(cri, "registry"); reg == nil || reg["config_path"] != ContainerdCertsDir {
		t.Errorf("%s: registry %v", node, reg)
	}
	// What the image had stays: kind merges, never replaces.
	if cri["sandbox_image"] != "registry.k8s.io/pause:3.10" {
		t.Errorf("%s: the image's own CRI settings were lost: %v", node, cri)
	}
	c.files(node, "containerd-restarted")
}

// kind's own validation runs before anything is created: a config it refuses never reaches
// docker run.
func TestKindRefusesAnInvalidNodeConfig(t *testing.T) {
	cfg, err := Config(shippedLane(t, "kubernetes"), ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Cluster.Networking.PodSubnet = "10.244.0.0" // no prefix length
	c := createWithKind(t, "kubernetes", cfg, "v1.35.0")
	if c.err == nil || !strings.Contains(c.err.Error(), "invalid pod subnet") || len(c.runs) != 0 {
		t.Fatalf("want kind's own refusal before any container, got %v (ran %v)", c.err, keys(c.runs))
	}
}

// strictDecode decodes a kubeadm or kubelet configuration document as kubeadm checks one
// (k8s.io/kubernetes v1.35.4 cmd/kubeadm/app/util/config/strict/strict.go:29-48: apimachinery's
// YAML serializer in strict mode, case-sensitive, unknown and duplicate fields refused). The
// kubelet itself falls back to lenient decoding and only logs a strict error
// (pkg/kubelet/kubeletconfig/util/codec/codec.go:77-103), so a misspelt field would be dropped
// on the node without a word: here it fails.
func strictDecode(doc string, into runtime.Object) error {
	s := runtime.NewScheme()
	if err := kubeletv1beta1.AddToScheme(s); err != nil {
		return err
	}
	s.AddKnownTypes(kubeadmv1beta3.GroupVersion, &kubeadmv1beta3.ClusterConfiguration{}, &kubeadmv1beta3.InitConfiguration{}, &kubeadmv1beta3.JoinConfiguration{})
	s.AddKnownTypes(kubeadmv1beta4.GroupVersion, &kubeadmv1beta4.ClusterConfiguration{}, &kubeadmv1beta4.InitConfiguration{}, &kubeadmv1beta4.JoinConfiguration{})
	ser := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, s, s, kjson.SerializerOptions{Yaml: true, Strict: true})
	_, _, err := ser.Decode([]byte(doc), nil, into)
	return err
}

func dig(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
