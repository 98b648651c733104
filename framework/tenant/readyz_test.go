package tenant

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// A tenant address that never answers ends the tenant phase at its deadline; when the substrate
// can say what keeps it from answering (the kind substrate: no node announces the LoadBalancer
// address), the verdict says that and is an install failure, not a bare deadline. Without the
// substrate's word it stays a deadline.
func TestReadyzDeadlineSaysWhatTheSubstrateSeesMissing(t *testing.T) {
	// An address nothing listens on: a port taken and released.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	tc, err := cluster.New("tenant t1", &rest.Config{Host: "https://" + addr, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sk := SecretKey{Namespace: "tenant-root", Name: "kubernetes-t1-admin-kubeconfig", Key: "super-admin.svc"}
	for _, c := range []struct {
		why   string
		class verdict.Class
	}{
		{"", verdict.Deadline},
		{"MetalLB assigned 172.18.255.200 to Service tenant-root/kubernetes-t1-e2e-lb, but no node announces it: x: no Ready speaker pod", verdict.Install},
	} {
		tc.Unanswered = nil
		if c.why != "" {
			why := c.why
			tc.Unanswered = func(ctx context.Context) string {
				if ctx.Err() != nil {
					return "asked with an ended context"
				}
				return why
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		err := Platform{}.waitReadyz(ctx, "tenant control plane kubernetes-t1", tc, sk)
		cancel()
		var we *WaitError
		if !errors.As(err, &we) {
			t.Fatalf("want a WaitError, got %v", err)
		}
		if we.Class != c.class || !strings.Contains(we.Detail, "never answered /readyz") || !strings.Contains(we.Detail, c.why) {
			t.Fatalf("substrate says %q: class %s, detail %q", c.why, we.Class, we.Detail)
		}
	}
}
