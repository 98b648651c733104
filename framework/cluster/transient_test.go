package cluster

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func quick() RetryPolicy {
	return RetryPolicy{Attempts: 4, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
}

// serve answers the first n requests with status/body, then 200 "ok"; it records the bodies it saw.
func serve(t *testing.T, n int32, status int, body string) (*httptest.Server, *atomic.Int32, *[]string) {
	var calls atomic.Int32
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, string(b))
		if calls.Add(1) <= n {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &calls, &seen
}

func do(t *testing.T, rt http.RoundTripper, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestLeaderChangeIsRetriedWithTheSameBody(t *testing.T) {
	srv, calls, seen := serve(t, 2, 500, `{"kind":"Status","message":"etcdserver: leader changed"}`)
	var r Retries
	resp, body := do(t, RetryTransient(http.DefaultTransport, quick(), &r), http.MethodPost, srv.URL, `{"x":1}`)
	if resp.StatusCode != 200 || body != "ok" || calls.Load() != 3 || r.Count() != 2 {
		t.Fatalf("status %d body %q calls %d retries %d", resp.StatusCode, body, calls.Load(), r.Count())
	}
	for _, b := range *seen {
		if b != `{"x":1}` {
			t.Fatalf("replayed body %q", b)
		}
	}
}

func TestTooManyRequestsIsRetried(t *testing.T) {
	srv, calls, _ := serve(t, 1, 429, "slow down")
	resp, _ := do(t, RetryTransient(http.DefaultTransport, quick(), nil), http.MethodGet, srv.URL, "")
	if resp.StatusCode != 200 || calls.Load() != 2 {
		t.Fatalf("status %d calls %d", resp.StatusCode, calls.Load())
	}
}

// Product answers are never retried: a 500 with another message, a 403, a 422 go straight back.
func TestProductErrorsAreNotRetried(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{
		{500, `{"message":"admission webhook denied the request"}`},
		{403, `{"message":"forbidden"}`},
		{422, `{"message":"spec is immutable"}`},
	} {
		srv, calls, _ := serve(t, 1, tc.status, tc.body)
		resp, body := do(t, RetryTransient(http.DefaultTransport, quick(), nil), http.MethodPut, srv.URL, "{}")
		if resp.StatusCode != tc.status || body != tc.body || calls.Load() != 1 {
			t.Errorf("%d: status %d body %q calls %d", tc.status, resp.StatusCode, body, calls.Load())
		}
	}
}

func TestRetriesStopAtTheAttemptLimit(t *testing.T) {
	srv, calls, _ := serve(t, 100, 503, "etcdserver: request timed out")
	resp, body := do(t, RetryTransient(http.DefaultTransport, quick(), nil), http.MethodGet, srv.URL, "")
	if resp.StatusCode != 503 || !strings.Contains(body, "request timed out") || calls.Load() != 4 {
		t.Fatalf("status %d body %q calls %d", resp.StatusCode, body, calls.Load())
	}
}
