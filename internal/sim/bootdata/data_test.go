package bootdata

import (
	"strings"
	"testing"
)

const worker = `version: v1alpha1
machine:
  type: worker
  token: abcdef.0123456789abcdef
  network:
    extraHostEntries:
      - ip: 10.96.12.34
        aliases:
          - kubernetes-t1.tenant-test.svc
  ca:
    crt: VEFMT1M=
  kubelet:
    image: ghcr.io/siderolabs/kubelet:v1.35.4
cluster:
  controlPlane:
    endpoint: https://kubernetes-t1.tenant-test.svc:6443
  token: k8sjn1.0123456789abcdef
  ca:
    crt: SzhTIENB
`

// A Talos worker configuration gives the join its endpoint, the address its host entries give
// the endpoint's name, the bootstrap token and the cluster CA; the documents beside it (the
// Talos bootstrap provider may write several) do not matter.
func TestParseTalos(t *testing.T) {
	d, err := Parse([]byte("apiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\n---\n" + worker))
	if err != nil {
		t.Fatal(err)
	}
	if d.OS != osTalos || d.Endpoint != "https://kubernetes-t1.tenant-test.svc:6443" || d.BootstrapToken != "k8sjn1.0123456789abcdef" ||
		string(d.ClusterCA) != "K8S CA" || d.MachineToken != "abcdef.0123456789abcdef" || d.KubernetesVersion != "v1.35.4" ||
		d.Hosts["kubernetes-t1.tenant-test.svc"] != "10.96.12.34" {
		t.Fatalf("%+v", d)
	}
}

// What Talos itself refuses to load is an error in Talos' words.
func TestParseTalosRefusals(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"no endpoint", "    endpoint: https://kubernetes-t1.tenant-test.svc:6443\n", "", "cluster controlplane endpoint is required"},
		{"endpoint not a URL", "https://kubernetes-t1.tenant-test.svc:6443", "kubernetes-t1", "invalid controlplane endpoint"},
		{"no machine CA", "  ca:\n    crt: VEFMT1M=\n", "", "issuing CA or some accepted CAs are required"},
		{"cluster CA not base64", "crt: SzhTIENB", "crt: not!base64", "cluster.ca.crt is not base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Replace(worker, tc.from, tc.to, 1)
			if in == worker {
				t.Fatal("the test's replacement changed nothing")
			}
			if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, err)
			}
		})
	}
	if _, err := Parse([]byte("foo: bar\n")); err == nil {
		t.Fatal("neither Talos nor Kairos data was accepted")
	}
}
