package realupstream

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// A chart packs as helm package lays it out, leaves out what .helmignore names, and packs to
// the same bytes every time, so an artifact's digest is a function of the chart.
func TestPackChart(t *testing.T) {
	dir := filepath.Join("testdata", "charts", "hello")
	a, err := PackChart(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := PackChart(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two packs of the same chart differ")
	}
	gz, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	want := []string{"hello/Chart.yaml", "hello/templates/configmap.yaml", "hello/values.yaml"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("archive holds %v, want %v (.helmignore leaves out /NOTES.md and itself)", names, want)
	}
}

func TestHelmignore(t *testing.T) {
	// The Cozystack v1.6.1 Kubernetes chart's .helmignore, and cozy-lib's kinds of rules.
	dir := t.TempDir()
	p := filepath.Join(dir, ".helmignore")
	if err := os.WriteFile(p, []byte(".helmignore\n/logos\n/Makefile\n/hack\n/images/*/*\n# comment\n*.swp\n.git/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := readHelmignore(p)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rel     string
		dir     bool
		ignored bool
	}{
		{"logos", true, true},
		{"Makefile", false, true},
		{"templates/Makefile", false, false},
		{"hack", true, true},
		{"images/talos-csr-signer", true, false},
		{"images/talos-csr-signer/Dockerfile", false, true},
		{"images/kubectl.tag", false, false},
		{"templates/cluster.yaml", false, false},
		{"charts/cozy-lib/.helmignore", false, true},
		{"templates/x.swp", false, true},
		{".git", true, true},
		{".git", false, false},
	}
	for _, c := range cases {
		if got := h.ignored(c.rel, c.dir); got != c.ignored {
			t.Errorf("%s (dir %v): ignored %v, want %v", c.rel, c.dir, got, c.ignored)
		}
	}
	if err := os.WriteFile(p, []byte("!keep.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readHelmignore(p); err == nil {
		t.Fatal("a negated rule must be refused, not misread")
	}
}

// The cert-manager CRDs the platform ships are templated only by whole-line guards; anything
// templated inside a line is refused rather than guessed.
func TestStripHelmGuards(t *testing.T) {
	in := `{{- if or .Values.crds.enabled .Values.installCRDs }}
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: "issuers.cert-manager.io"
  {{- if .Values.crds.keep }}
  annotations:
    helm.sh/resource-policy: keep
  {{- end }}
  labels:
    {{- include "cert-manager.crd-labels" . | nindent 4 }}
spec:
  group: cert-manager.io
{{- end }}
`
	out, err := stripHelmGuards([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "{{") || !strings.Contains(string(out), "group: cert-manager.io") {
		t.Fatalf("stripped:\n%s", out)
	}
	if _, err := stripHelmGuards([]byte("metadata:\n  name: {{ .Release.Name }}\n")); err == nil {
		t.Fatal("a value templated inside a line must be refused")
	}
}

// Without what `make tools` makes, Find names what is missing and says how to build it.
func TestFindNamesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := Find(controlplane.Tools{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("want an error saying `make tools`, got %v", err)
	}
	env := "CAPK_MODULE=sigs.k8s.io/cluster-api-provider-kubevirt\nCAPK_VERSION=v0.1.10\nCAPK_SUM=h1:x\n"
	if err := os.WriteFile(filepath.Join(dir, "versions.env"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Find(controlplane.Tools{Dir: dir})
	for _, want := range []string{"capk-manager", "src/sigs.k8s.io/cluster-api-provider-kubevirt@v0.1.10", "CABPT_MODULE", "make tools"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// The webhook configurations a provider ships name an in-cluster Service; each is pointed at
// the local server's URL for the same path, with its CA.
func TestWebhookConfigurationsPointAtTheLocalServer(t *testing.T) {
	s, err := NewServing(t.TempDir(), "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(s.CertDir, f)); err != nil {
			t.Fatalf("%s: %v (controller-runtime's webhook server reads tls.crt and tls.key)", f, err)
		}
	}
	path := "/validate-x"
	cc := webhookClientConfig(path)
	if err := pointAt(&cc, s); err != nil {
		t.Fatal(err)
	}
	if cc.Service != nil || cc.URL == nil || *cc.URL != s.URL(path) || !bytes.Equal(cc.CABundle, s.CA.CertPEM) {
		t.Fatalf("client config %+v", cc)
	}
	var ports []int
	for range 3 {
		s, err := NewServing(t.TempDir(), "test")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, s.Port)
	}
	sort.Ints(ports)
	if ports[0] == 0 {
		t.Fatalf("ports %v", ports)
	}
}

func webhookClientConfig(path string) admissionv1.WebhookClientConfig {
	return admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "system", Name: "webhook-service", Path: &path}}
}
