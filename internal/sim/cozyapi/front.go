package cozyapi

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"

	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
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
	ln, ca, err := controlplane.ListenTLS("cozyapi-front")
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = upstream.Transport()
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
