package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// transientMessages are the apiserver answers that say "try again", not "no".
// They come from etcd leader elections and overloaded control planes, never from product logic.
var transientMessages = []string{
	"etcdserver: leader changed",
	"etcdserver: request timed out",
	"etcdserver: too many requests",
	"the server was unable to return a response in the time allotted",
	"the server is currently unable to handle the request",
}

// RetryPolicy bounds the client-side retries of transient API errors.
type RetryPolicy struct {
	// Attempts is the most tries per request, the first included.
	Attempts int
	// Backoff is the wait before the second try; it doubles each time, capped at MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// DefaultRetryPolicy is what every harness client uses: a handful of quick retries, well
// under any wait's budget, so a leader election costs seconds and never a verdict.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Attempts: 6, Backoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second}
}

// Retries counts the transient errors a transport absorbed, for the run's report.
type Retries struct{ n atomic.Int64 }

// Count is the number of retried requests so far.
func (r *Retries) Count() int64 { return r.n.Load() }

type retryTransport struct {
	next    http.RoundTripper
	policy  RetryPolicy
	retries *Retries
}

// RetryTransient wraps rt so that transient apiserver errors (etcd leader changes, 429,
// timeouts, refused connections) are retried inside the client. Anything else, including
// every 4xx but 429, goes straight back to the caller.
func RetryTransient(rt http.RoundTripper, policy RetryPolicy, counter *Retries) http.RoundTripper {
	if counter == nil {
		counter = &Retries{}
	}
	return &retryTransport{next: rt, policy: policy, retries: counter}
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	wait := t.policy.Backoff
	for attempt := 1; ; attempt++ {
		resp, err := t.next.RoundTrip(req)
		last := attempt >= t.policy.Attempts
		retry, after := t.transient(req, resp, err)
		if !retry || last {
			return resp, err
		}
		if req.Body != nil && req.GetBody == nil {
			return resp, err // the body cannot be replayed
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if after > 0 {
			wait = after
		}
		if err := sleep(req.Context(), min(wait, t.policy.MaxBackoff)); err != nil {
			return nil, err
		}
		wait *= 2
		t.retries.n.Add(1)
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// transient decides whether a response or error is worth another try, and how long to wait.
func (t *retryTransport) transient(req *http.Request, resp *http.Response, err error) (bool, time.Duration) {
	if err != nil {
		if req.Context().Err() != nil {
			return false, 0
		}
		// A refused or reset connection never reached the apiserver's storage; a timeout on a
		// read is safe to repeat.
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
			(isTimeout(err) && req.Method == http.MethodGet), 0
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return true, time.Duration(secs) * time.Second
	case http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil {
			return false, 0
		}
		for _, m := range transientMessages {
			if strings.Contains(string(body), m) {
				return true, 0
			}
		}
	}
	return false, 0
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
