package controlplane_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// A listener from ListenTLS completes a handshake with a client that trusts only its CA, and
// offers the protocols it was given.
func TestListenTLSIsTrustedByItsOwnCA(t *testing.T) {
	ln, ca, err := controlplane.ListenTLS("front", "h2", "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			_ = conn.(*tls.Conn).Handshake()
			conn.Close()
		}
	}()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatalf("handshake with a client trusting the front's CA: %v", err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().NegotiatedProtocol; got != "h2" {
		t.Errorf("negotiated %q, want h2", got)
	}
	if ca.Cert.Subject.CommonName != "front-ca" {
		t.Errorf("CA named %q, want front-ca", ca.Cert.Subject.CommonName)
	}
}

// WebhookServing writes tls.crt and tls.key for 127.0.0.1, signed by the CA it returns, and
// picks a port.
func TestWebhookServingWritesAPairItsCASigned(t *testing.T) {
	dir := t.TempDir()
	ca, port, err := controlplane.WebhookServing(dir, "hooks")
	if err != nil {
		t.Fatal(err)
	}
	if port <= 0 {
		t.Errorf("port %d", port)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("tls.crt does not verify for 127.0.0.1 against the returned CA: %v", err)
	}
	info, err := os.Stat(filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("tls.key mode %v, want readable by the owner only", info.Mode().Perm())
	}
}
