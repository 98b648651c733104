package simulated

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/sim/cozyapi"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// maxRequestBody is the largest request body the proxy forwards: the apiserver's own limit.
const maxRequestBody = 3 << 20

// transientEvery: under apiserver-transient, one request in this many (watches excepted)
// answers 500 "etcdserver: leader changed", as an apiserver does during an etcd election.
const transientEvery = 7

// proxy is a TLS-terminating reverse proxy in front of the management apiserver: the harness
// talks to it with a bearer token, which passes through (a client certificate would not). It
// serves the platform's apps itself, as the cozystack-api stand-in.
type proxy struct {
	URL    string
	CA     *controlplane.CA
	srv    *http.Server
	ln     net.Listener
	count  atomic.Int64
	inject bool
	env    *simenv.Env
	// consoles serves the VMIs' console subresource (the apiserver does not: KubeVirt's
	// virt-api does, through the aggregator).
	consoles *consoleServer
}

func startProxy(upstream *controlplane.APIServer, admin *rest.Config, env *simenv.Env, log io.Writer) (*proxy, error) {
	target, err := url.Parse(upstream.URL)
	if err != nil {
		return nil, err
	}
	ln, ca, err := controlplane.ListenTLS("sim-proxy", "h2", "http/1.1")
	if err != nil {
		return nil, err
	}
	p := &proxy{URL: "https://" + ln.Addr().String(), CA: ca, ln: ln, env: env,
		inject: env.Faults.Selected(faults.APIServerTransient)}
	rp := httputil.NewSingleHostReverseProxy(target)
	transport := upstream.Transport()
	transport.ForceAttemptHTTP2 = true
	transport.MaxIdleConnsPerHost = 100
	rp.Transport = transport
	rp.FlushInterval = -1 // watches and log follows stream
	// The platform's apps are served the way cozystack-api serves them: views of their
	// HelmReleases (internal/sim/cozyapi).
	apps, err := cozyapi.New(admin, rp)
	if err != nil {
		return nil, err
	}
	apps.Log = log
	if env.RealNodeRegistry != "" {
		apps.PostRenderers = realNodePostRenderers(env.RealNodeRegistry)
	}
	consoles, err := newConsoleServer(admin, env.Serial)
	if err != nil {
		return nil, err
	}
	p.consoles = consoles
	p.srv = &http.Server{Handler: p.handler(apps)}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *proxy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.inject && r.URL.Query().Get("watch") != "true" && !strings.HasSuffix(r.URL.Path, "/log") &&
			p.count.Add(1)%transientEvery == 0 {
			// Every injection is recorded, so a run can show how many it absorbed.
			_ = p.env.Observe(simenv.Observation{Fault: faults.APIServerTransient, Object: "management apiserver",
				Detail: fmt.Sprintf("%s %s answered 500 etcdserver: leader changed", r.Method, r.URL.Path)})
			writeStatus(w, http.StatusInternalServerError, "etcdserver: leader changed")
			return
		}
		// The console of a VMI on a real Node is virt-api's own, through the aggregator.
		if m := consolePath.FindStringSubmatch(r.URL.Path); m != nil && p.consoles != nil && !p.consoles.onRealNode(r.Context(), p.env, m[1], m[2]) {
			p.consoles.serve(w, r, m[1], m[2])
			return
		}
		if err := bufferBody(r); err != nil {
			writeStatus(w, http.StatusRequestEntityTooLarge, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writeStatus answers as the apiserver does when it refuses a request: a failed metav1.Status.
func writeStatus(w http.ResponseWriter, code int, message string) {
	data, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: message, Code: int32(code)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// bufferBody reads a request's body whole before it is forwarded. Streamed through, a body
// can deadlock the proxy over HTTP/2: the apiserver refuses a create (403) before it reads the
// body, the proxy passes the refusal's headers on, the client stops sending the body as HTTP/2
// clients do on an error status, and the proxy's upstream transport waits for the rest of the
// body before it lets the proxy end the response. The client then waits for the response's end
// until its context expires. Read first, the body is whole before any answer exists.
func bufferBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	_ = r.Body.Close()
	if err != nil {
		return fmt.Errorf("sim proxy: reading the request body of %s %s: %w", r.Method, r.URL.Path, err)
	}
	if len(data) > maxRequestBody {
		return fmt.Errorf("sim proxy: the request body of %s %s is over %d bytes", r.Method, r.URL.Path, maxRequestBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.ContentLength = int64(len(data))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return nil
}

func (p *proxy) close() {
	if p != nil && p.srv != nil {
		_ = p.srv.Close()
	}
}
