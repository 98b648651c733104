package simulated

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"k8s.io/client-go/rest"
)

// An apiserver refuses a create before it reads the body, and an HTTP/2 client stops sending a
// body once an error status arrives. Streamed through, that left the proxy waiting for the rest
// of the body and the client waiting for the end of the response until its context expired
// (seen as a tenant admin's forbidden create hanging for minutes). The client here behaves the
// same way: it sends half its body, then stops for good if an answer comes first, and sends the
// rest only if none does. The refusal must reach it whole.
func TestProxyPassesARefusalSentBeforeTheBody(t *testing.T) {
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`)
	}))
	upstream.EnableHTTP2 = true
	upstream.StartTLS()
	defer upstream.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw})
	px, err := startProxy(&controlplane.APIServer{URL: upstream.URL, CA: &controlplane.CA{CertPEM: caPEM}}, &rest.Config{Host: upstream.URL}, &simenv.Env{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer px.close()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(px.CA.CertPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()

	body, feed := io.Pipe()
	answered := make(chan struct{})
	go func() {
		_, _ = io.WriteString(feed, `{"apiVersion":"cozystack.io/v1alpha1",`)
		select {
		case <-answered: // as an HTTP/2 client on an error status: the rest is never sent
		case <-time.After(time.Second):
			_, _ = io.WriteString(feed, `"kind":"NodeGroupClass"}`)
			_ = feed.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, px.URL+"/apis/cozystack.io/v1alpha1/nodegroupclasses", body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	close(answered)
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the client spoke %s to the proxy; the deadlock needs HTTP/2", resp.Proto)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the refusal through the proxy: %v (the proxy never ended the response)", err)
	}
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(data), `"Forbidden"`) {
		t.Fatalf("got %d %s, want the upstream's 403", resp.StatusCode, data)
	}
}

// A body over the apiserver's limit is refused by the proxy with a Status, not forwarded; one
// within it is forwarded whole, with its length.
func TestProxyRefusesAnOversizedBody(t *testing.T) {
	var forwarded []byte
	h := (&proxy{}).handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded, _ = io.ReadAll(r.Body)
		if r.ContentLength != int64(len(forwarded)) {
			t.Errorf("forwarded ContentLength %d for a %d-byte body", r.ContentLength, len(forwarded))
		}
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/x/configmaps", strings.NewReader(strings.Repeat("x", maxRequestBody+1))))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"kind":"Status"`) ||
		!strings.Contains(rec.Body.String(), "POST /api/v1/namespaces/x/configmaps") || forwarded != nil {
		t.Fatalf("got %d %s (forwarded %d bytes); want a 413 Status naming the request, nothing forwarded", rec.Code, rec.Body, len(forwarded))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/x/configmaps", strings.NewReader("{}")))
	if rec.Code != http.StatusOK || string(forwarded) != "{}" {
		t.Fatalf("got %d, forwarded %q; want the body forwarded whole", rec.Code, forwarded)
	}
}
