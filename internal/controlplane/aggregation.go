package controlplane

import (
	"os"
	"path/filepath"
)

// The aggregation layer: an extension apiserver (KubeVirt's virt-api serves its subresources
// this way) is reached through kube-apiserver, which calls it with a front-proxy client
// certificate and names the user in request headers the extension trusts by that
// certificate's CA. Every kube-apiserver here is configured as kubeadm configures it
// (k8s.io/kubernetes v1.35.4 cmd/kubeadm/app/phases/controlplane/manifests.go:202-210: "Without
// the generated client cert, this will never be usable so add it unconditionally with
// recommended values"), with its own front-proxy CA and a client certificate whose common
// name is front-proxy-client (cmd/kubeadm/app/constants/constants.go:136-148).

// frontProxyCN is the front-proxy client certificate's common name, the one name
// --requestheader-allowed-names admits.
const frontProxyCN = "front-proxy-client"

// frontProxy writes the front-proxy CA and client certificate into dir and returns the flags
// that use them. --enable-aggregator-routing sends the aggregator's calls to a Service's
// endpoint addresses instead of its ClusterIP (k8s.io/kubernetes v1.35.4
// pkg/controlplane/apiserver/options/options.go:201-202): no kube-proxy routes ClusterIPs on
// this host, and an extension's Pod answers on its own address.
func frontProxy(dir, name string) (*CA, []string, error) {
	ca, err := NewCA(name + "-front-proxy-ca")
	if err != nil {
		return nil, nil, err
	}
	client, err := ca.Client(frontProxyCN)
	if err != nil {
		return nil, nil, err
	}
	p := func(f string) string { return filepath.Join(dir, f) }
	if err := os.WriteFile(p("front-proxy-ca.crt"), ca.CertPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := client.Write(p("front-proxy-client.crt"), p("front-proxy-client.key")); err != nil {
		return nil, nil, err
	}
	return ca, []string{
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-client-ca-file=" + p("front-proxy-ca.crt"),
		"--requestheader-allowed-names=" + frontProxyCN,
		"--proxy-client-cert-file=" + p("front-proxy-client.crt"),
		"--proxy-client-key-file=" + p("front-proxy-client.key"),
		"--enable-aggregator-routing=true",
	}, nil
}
