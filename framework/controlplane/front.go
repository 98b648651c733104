package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
)

// ListenTLS listens on a free loopback port with a serving certificate for name (valid for
// 127.0.0.1 and localhost) from a CA of its own, name+"-ca", which clients must trust. It is
// how a server in front of an apiserver terminates TLS. nextProtos is what it offers in ALPN
// (none: HTTP/1.1 only).
func ListenTLS(name string, nextProtos ...string) (net.Listener, *CA, error) {
	ca, err := NewCA(name + "-ca")
	if err != nil {
		return nil, nil, err
	}
	kp, err := ca.Serving(name, "127.0.0.1", "localhost")
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

// Transport is an HTTP transport to the apiserver that trusts its CA and presents no client
// certificate: what a proxy in front of it passes requests (and their bearer tokens) through.
func (a *APIServer) Transport() *http.Transport {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(a.CA.CertPEM)
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
}
