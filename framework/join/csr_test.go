package join

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// csr is a kubelet's certificate request as the kubelet posts it: subject system:node:<node> in
// system:nodes, signed by a key of its own; a serving request names the Node's addresses.
func csr(t *testing.T, name, node, signer string, ips ...string) certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: csrNodePrefix + node, Organization: []string{"system:nodes"}}}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signer, Username: csrNodePrefix + node}}
}

// A Kairos worker registers as metal-<id>, not as its VMI: its kubelet's CSRs are found by the
// Node the join tied to the VMI, and by the VMI's address a serving request names, as the join
// ties a Node named otherwise to its VMI; another Node's CSRs are not.
func TestTheCSRsOfAWorkerNamedOtherwiseAreFound(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm-1"}}
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{IP: "10.0.0.7", IPs: []string{"10.0.0.7"}}}
	client := csr(t, "node-csr-a", "metal-3f2a", certificatesv1.KubeAPIServerClientKubeletSignerName)
	serving := csr(t, "csr-b", "metal-3f2a", certificatesv1.KubeletServingSignerName, "10.0.0.7")
	named := csr(t, "node-csr-c", "vm-1", certificatesv1.KubeAPIServerClientKubeletSignerName)
	other := csr(t, "node-csr-d", "metal-9999", certificatesv1.KubeAPIServerClientKubeletSignerName)
	otherServing := csr(t, "csr-e", "metal-9999", certificatesv1.KubeletServingSignerName, "10.0.0.8")
	all := []certificatesv1.CertificateSigningRequest{client, serving, named, other, otherServing}
	names := func(list []certificatesv1.CertificateSigningRequest) map[string]bool {
		out := map[string]bool{}
		for _, c := range list {
			out[c.Name] = true
		}
		return out
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal-3f2a"}}
	got := names(csrsOf("vm-1", vmi, node, all))
	if !got["node-csr-a"] || !got["csr-b"] || !got["node-csr-c"] || got["node-csr-d"] || got["csr-e"] || len(got) != 3 {
		t.Errorf("with the Node tied: %v; want node-csr-a, csr-b, node-csr-c", got)
	}
	got = names(csrsOf("vm-1", vmi, nil, all))
	if !got["node-csr-a"] || !got["csr-b"] || !got["node-csr-c"] || len(got) != 3 {
		t.Errorf("by the VMI's address alone: %v; want node-csr-a, csr-b, node-csr-c", got)
	}
}
