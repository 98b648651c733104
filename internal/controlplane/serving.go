package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"path/filepath"
)

// servingPair makes a CA of its own, name+"-ca", and a serving certificate it signs for name,
// valid for 127.0.0.1 and localhost: the identity of a loopback server whose clients trust that
// CA alone.
func servingPair(name string) (*CA, KeyPair, error) {
	ca, err := NewCA(name + "-ca")
	if err != nil {
		return nil, KeyPair{}, err
	}
	kp, err := ca.Serving(name, "127.0.0.1", "localhost")
	if err != nil {
		return nil, KeyPair{}, err
	}
	return ca, kp, nil
}

// ListenTLS listens on a free loopback port with a serving certificate for name from a CA of
// its own, name+"-ca", which clients must trust. It is how a server in front of an apiserver
// terminates TLS. nextProtos is what it offers in ALPN (none: HTTP/1.1 only).
func ListenTLS(name string, nextProtos ...string) (net.Listener, *CA, error) {
	ca, kp, err := servingPair(name)
	if err != nil {
		return nil, nil, err
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: nextProtos})
	if err != nil {
		return nil, nil, err
	}
	return ln, ca, nil
}

// WebhookServing is the TLS identity and address of a webhook server on loopback: a CA of its
// own, name+"-ca", a serving certificate for name written as tls.crt and tls.key into dir (the
// names controller-runtime's webhook server reads from its certificate folder), and a free port.
func WebhookServing(dir, name string) (*CA, int, error) {
	ca, kp, err := servingPair(name)
	if err != nil {
		return nil, 0, err
	}
	if err := kp.Write(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err != nil {
		return nil, 0, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, 0, err
	}
	return ca, port, nil
}

// Transport is an HTTP transport to the apiserver that trusts its CA and presents no client
// certificate: what a proxy in front of it passes requests (and their bearer tokens) through.
func (a *APIServer) Transport() *http.Transport {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(a.CA.CertPEM)
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
}
