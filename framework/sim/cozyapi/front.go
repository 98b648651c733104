package cozyapi

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"

	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-e2e/framework/controlplane"
)

// Front is a TLS server in front of a management apiserver that serves the apps as this
// stand-in does and passes every other request through: the apiserver as a client of the
// platform sees it. The sim's proxy does the same (with its faults); tests start a Front.
type Front struct {
	URL string
	CA  *controlplane.CA
	srv *http.Server
}

// StartFront serves upstream's apps and passes the rest through, with admin as cozystack-api's
// own identity. Clients authenticate with a bearer token, which passes through.
func StartFront(upstream *controlplane.APIServer) (*Front, error) {
	target, err := url.Parse(upstream.URL)
	if err != nil {
		return nil, err
	}
	ca, err := controlplane.NewCA("cozyapi-front-ca")
	if err != nil {
		return nil, err
	}
	kp, err := ca.Serving("cozyapi-front", "127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(upstream.CA.CertPEM)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	rp.FlushInterval = -1
	apps, err := New(upstream.Admin(), rp)
	if err != nil {
		ln.Close()
		return nil, err
	}
	f := &Front{URL: "https://" + ln.Addr().(*net.TCPAddr).String(), CA: ca, srv: &http.Server{Handler: apps}}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// Config is a REST config for the bearer token token through the front.
func (f *Front) Config(token string) *rest.Config {
	return &rest.Config{Host: f.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: f.CA.CertPEM}}
}

// Close stops the front.
func (f *Front) Close() { _ = f.srv.Close() }
