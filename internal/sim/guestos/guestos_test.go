package guestos

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func worker(t *testing.T, edits ...string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/worker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			t.Fatalf("testdata/worker.yaml has no %q to replace", edits[i])
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	return []byte(s)
}

func files(t *testing.T, m Machine) map[string]string {
	t.Helper()
	fs, err := Files(m)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range fs {
		out[f.Path] = string(f.Data)
	}
	return out
}

// A worker of Cozystack's chart: named by the config drive's metadata, its kubelet pointed at
// the tenant's Service name with the cluster's CA and token, the chart's reservations kept and
// Talos' own fields set.
func TestAChartWorkerGetsTalosFiles(t *testing.T) {
	m, err := NewMachine(worker(t), "Kubernetes-T1-md0-x7_k2.tenant-test")
	if err != nil {
		t.Fatal(err)
	}
	if m.NodeName != "kubernetes-t1-md0-x7-k2" {
		t.Errorf("node name %q, want kubernetes-t1-md0-x7-k2 (short name, lower-cased, _ made -)", m.NodeName)
	}
	m.NodeIP = "10.0.2.2"
	f := files(t, m)

	var kc struct {
		Clusters []struct {
			Name    string
			Cluster map[string]string
		}
		Users []struct {
			Name string
			User map[string]string
		}
		CurrentContext string `json:"current-context"`
	}
	if err := yaml.Unmarshal([]byte(f[BootstrapKubeconfig]), &kc); err != nil {
		t.Fatal(err)
	}
	if len(kc.Clusters) != 1 || kc.Clusters[0].Name != "local" || kc.Clusters[0].Cluster["server"] != "https://kubernetes-t1.tenant-test.svc:6443" ||
		kc.Clusters[0].Cluster["certificate-authority-data"] == "" || len(kc.Users) != 1 || kc.Users[0].Name != "kubelet@local" ||
		kc.Users[0].User["token"] != "k8sjn1.0123456789abcdef" || kc.CurrentContext != "kubelet@local" {
		t.Errorf("bootstrap kubeconfig:\n%s", f[BootstrapKubeconfig])
	}
	if !strings.Contains(f[CACert], "MIIBtenantca") || strings.Contains(f[CACert], "MIIBtalosca") {
		t.Errorf("%s holds %q, want the cluster's CA (not the machine's)", CACert, f[CACert])
	}

	var kubelet map[string]any
	if err := yaml.Unmarshal([]byte(f[KubeletConfig]), &kubelet); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"clusterDNS": []any{"10.95.0.10"}, "clusterDomain": "cluster.local", "cgroupRoot": "/", "rotateCertificates": true,
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock", "resolvConf": ResolvConf, "port": float64(10250),
		"systemReserved": map[string]any{"cpu": "50m", "memory": "256Mi"}, "authorization": map[string]any{"mode": "Webhook"},
		"protectKernelDefaults": true, "failSwapOn": false, "oomScoreAdj": float64(-450),
	} {
		if !reflect.DeepEqual(kubelet[k], want) {
			t.Errorf("kubelet.yaml %s: %#v, want %#v", k, kubelet[k], want)
		}
	}
	if ev, _ := kubelet["evictionHard"].(map[string]any); ev["memory.available"] != "7%" {
		t.Errorf("kubelet.yaml evictionHard: %v, want the chart's", kubelet["evictionHard"])
	}
	if !strings.Contains(f["/etc/hosts"], "10.96.12.34 kubernetes-t1.tenant-test.svc kubernetes-t1.tenant-test.svc.cluster.local\n") ||
		!strings.Contains(f["/etc/hosts"], "10.0.2.2 Kubernetes-T1-md0-x7_k2.tenant-test\n") {
		t.Errorf("/etc/hosts:\n%s", f["/etc/hosts"])
	}
	if want := "nameserver 10.96.0.10\nsearch svc.cozy.local cozy.local svc.cluster.local cluster.local\n"; f[ResolvConf] != want {
		t.Errorf("%s: %q, want %q", ResolvConf, f[ResolvConf], want)
	}
	if !strings.Contains(f[CNIConfig], `"subnet": "10.243.0.0/24"`) {
		t.Errorf("CNI configuration not on the first /24 of the pod subnet:\n%s", f[CNIConfig])
	}
	if m.Data.KubernetesVersion != "v1.35.6" {
		t.Errorf("kubelet version %q, want the image's tag v1.35.6", m.Data.KubernetesVersion)
	}
}

// The flags for Talos' own test's worker come out as Talos' test expects them
// (siderolabs/talos v1.13.6 internal/app/machined/pkg/controllers/k8s/kubelet_spec_test.go:40-84).
func TestKubeletArgsAreTalos(t *testing.T) {
	m, err := NewMachine(worker(t, "  network:\n    dnsDomain", "  externalCloudProvider:\n    enabled: true\n  network:\n    dnsDomain",
		"    extraConfig:\n", "    extraArgs:\n      foo: bar\n    extraConfig:\n"), "example.com")
	if err != nil {
		t.Fatal(err)
	}
	m.NodeIP = "172.20.0.2"
	got, err := KubeletArgs(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubeconfig",
		"--cert-dir=/var/lib/kubelet/pki",
		"--cloud-provider=external",
		"--config=/etc/kubernetes/kubelet.yaml",
		"--foo=bar",
		"--hostname-override=example",
		"--kubeconfig=/etc/kubernetes/kubeconfig-kubelet",
		"--node-ip=172.20.0.2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kubelet flags:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// What Talos refuses to load or run, the stand-in refuses with Talos' words.
func TestWhatTalosRefusesIsRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		edits []string
		host  string
		want  string
	}{
		{"a protected kubelet field", []string{"    extraConfig:\n", "    extraConfig:\n      rotateCertificates: false\n"}, "h", `field "rotateCertificates" can't be overridden`},
		{"a denied kubelet flag", []string{"    extraConfig:\n", "    extraArgs:\n      cert-dir: /tmp\n    extraConfig:\n"}, "h", `extra arg "cert-dir" is not allowed`},
		{"KubePrism", []string{"      enabled: false", "      enabled: true"}, "h", "kubePrism"},
		{"no hostname anywhere", nil, "", "no hostname"},
		{"a hostname with no name in it", nil, "__.x", "could not convert hostname"},
		{"a token without its secret", []string{"token: k8sjn1.0123456789abcdef", "token: k8sjn1"}, "h", "is not <id>.<secret>"},
		{"a #cloud-config", []string{"# A worker", "#cloud-config\n# A worker"}, "h", "#cloud-config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := NewMachine(worker(t, c.edits...), c.host)
			if err == nil {
				_, err = Files(m)
			}
			if err == nil {
				_, err = KubeletArgs(m)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// machine.registries.mirrors become containerd's hosts.toml files as Talos writes them
// (siderolabs/talos v1.13.6 internal/pkg/containers/cri/containerd/hosts_test.go:62, :138): the
// endpoints in order, the last one the server under skipFallback, a port in the folder's name.
func TestMirrorsAreContainerdHosts(t *testing.T) {
	m, err := NewMachine(worker(t, "  install:\n", `  registries:
    mirrors:
      docker.io:
        endpoints: ["http://192.0.2.2:5000", "https://mirror.example"]
      registry.example:5001:
        endpoints: ["http://192.0.2.2:5000"]
        skipFallback: true
  install:
`), "h")
	if err != nil {
		t.Fatal(err)
	}
	f := files(t, m)
	if got, want := f[RegistryHosts+"/docker.io/hosts.toml"], "[host]\n  [host.'http://192.0.2.2:5000']\n    capabilities = ['pull', 'resolve']\n  [host.'https://mirror.example']\n    capabilities = ['pull', 'resolve']\n"; got != want {
		t.Errorf("docker.io hosts.toml:\n%s\nwant\n%s", got, want)
	}
	if got, want := f[RegistryHosts+"/registry.example_5001_/hosts.toml"], "server = 'http://192.0.2.2:5000'\ncapabilities = ['pull', 'resolve']\n[host]\n"; got != want {
		t.Errorf("registry.example:5001 hosts.toml:\n%q\nwant\n%q", got, want)
	}
}
