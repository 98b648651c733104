package install

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/fluxrelease"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestFetchVerifiesThePinnedDigest(t *testing.T) {
	body := "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n# only a comment\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: a}}\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok.yaml" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	ctx := context.Background()
	m, err := Fetch(ctx, srv.URL+"/ok.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := m.Objects()
	if err != nil || len(objs) != 2 || objs[1].Obj.GetKind() != "ConfigMap" || !strings.HasSuffix(objs[1].Source, "ok.yaml#2[0]") {
		t.Fatalf("decode: %v %+v", err, objs)
	}
	if _, err := Fetch(ctx, srv.URL+"/ok.yaml", m.SHA256); err != nil {
		t.Fatalf("its own digest refused: %v", err)
	}
	_, err = Fetch(ctx, srv.URL+"/ok.yaml", "sha256:"+strings.Repeat("a", 64))
	if err == nil || !strings.Contains(err.Error(), "sha256 is "+m.SHA256+", the platform source pins sha256:aaaa") {
		t.Fatalf("a changed asset passed: %v", err)
	}
	if _, err := Fetch(ctx, srv.URL+"/missing.yaml", ""); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a missing asset: %v", err)
	}
	if _, err := Decode("x.yaml", []byte("kind: ConfigMap\nmetadata: {name: c}\n")); err == nil || !strings.Contains(err.Error(), "x.yaml#0: apiVersion, kind and metadata.name are required") {
		t.Fatalf("a document without apiVersion: %v", err)
	}
}

func TestRangeInSubnet(t *testing.T) {
	for subnet, want := range map[string]string{
		"172.18.0.0/16": "172.18.255.200-172.18.255.250",
		"10.89.0.0/24":  "10.89.0.200-10.89.0.250",
	} {
		got, err := RangeInSubnet(subnet)
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", subnet, got, err, want)
		}
	}
	for _, bad := range []string{"fc00:f853:ccd:e793::/64", "172.18.0.0/28", "nope"} {
		if _, err := RangeInSubnet(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestImageMatches(t *testing.T) {
	d := "sha256:" + strings.Repeat("1", 64)
	cases := []struct {
		image, version, digest string
		want                   bool
	}{
		{"quay.io/kubevirt/virt-operator:v1.8.4", "v1.8.4", "unknown", true},
		{"quay.io/kubevirt/virt-operator:v1.8.40", "v1.8.4", "unknown", false},
		{"localhost:5000/virt-operator:v1.8.4@" + d, "v1.8.4", d, true},
		{"localhost:5000/virt-operator:v1.8.4", "v1.8.4", d, false},
		{"localhost:5000/virt-operator", "v1.8.4", "", false},
	}
	for _, c := range cases {
		if got, _ := imageMatches(c.image, c.version, c.digest); got != c.want {
			t.Errorf("%s against %s/%s: %t", c.image, c.version, c.digest, got)
		}
	}
}

// The platform gate judges every HelmRelease on every watch event; a platform has about 150.
func BenchmarkJudgeHelmReleases(b *testing.B) {
	var objs []*unstructured.Unstructured
	for i := 0; i < 300; i++ {
		hr := obj("helm.toolkit.fluxcd.io/v2", "HelmRelease", "ns", fmt.Sprintf("hr-%03d", i))
		hr.Object["status"] = hrStatus("True", "InstallSucceeded", "ok", "deployed", "superseded")
		objs = append(objs, hr)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(HelmReleasesNotReady(objs)) != 0 || len(fluxrelease.Remediations(objs)) != 0 {
			b.Fatal("judged wrong")
		}
	}
}

// The platform Package carries the cluster domain the kind config gives kubeadm, so the
// platform's names (etcd-operator --cluster-domain, Talos search domains) resolve, and the
// control-plane address for kube-ovn.
func TestPlatformPackageCarriesTheClusterDomain(t *testing.T) {
	l := testLane(t)
	pkg, err := PlatformPackage(l, PlatformInput{ControlPlaneIP: "172.18.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	nw, _, _ := unstructured.NestedMap(pkg.Obj.Object, "spec", "components", "platform", "values", "networking")
	if nw["clusterDomain"] != "cozy.local" || nw["kubeovn"].(map[string]any)["MASTER_NODES"] != "172.18.0.2" {
		t.Fatalf("networking: %v", nw)
	}
	l.Kind.Networking.DNSDomain = "e2e.example"
	pkg, _ = PlatformPackage(l, PlatformInput{ControlPlaneIP: "172.18.0.2"})
	if d, _, _ := unstructured.NestedString(pkg.Obj.Object, "spec", "components", "platform", "values", "networking", "clusterDomain"); d != "e2e.example" {
		t.Fatalf("clusterDomain %q, want the lane's", d)
	}
}

// kube-ovn's pod range (the platform's networking.podCIDR) is the platform's own, not the kind
// cluster's pod range: Cilium takes its router and ingress addresses from each Node's podCIDR,
// cut from the cluster's range, and kube-ovn hands pods the lowest free addresses of its own,
// so the two must be disjoint (Cozystack's e2e, commit 9ace63b44). The Service range is shared.
func TestPlatformPackageKeepsKubeOVNOffTheClusterPodRange(t *testing.T) {
	l := testLane(t)
	pkg, err := PlatformPackage(l, PlatformInput{ControlPlaneIP: "172.18.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	nw, _, _ := unstructured.NestedMap(pkg.Obj.Object, "spec", "components", "platform", "values", "networking")
	want := map[string]any{"podCIDR": "10.244.0.0/16", "podGateway": "10.244.0.1", "joinCIDR": "100.64.0.0/16", "serviceCIDR": l.Kind.Networking.ServiceSubnet}
	for k, v := range want {
		if nw[k] != v {
			t.Errorf("networking.%s = %v, want %v (kind pod range %s)", k, nw[k], v, l.Kind.Networking.PodSubnet)
		}
	}
	l.Platform.Networking = &lane.PlatformNetworking{PodCIDR: "10.250.0.0/16"}
	pkg, _ = PlatformPackage(l, PlatformInput{ControlPlaneIP: "172.18.0.2"})
	nw, _, _ = unstructured.NestedMap(pkg.Obj.Object, "spec", "components", "platform", "values", "networking")
	if nw["podCIDR"] != "10.250.0.0/16" || nw["podGateway"] != "10.250.0.1" {
		t.Fatalf("the lane's platform.networking.podCIDR: %v", nw)
	}
}
