package kind

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
)

// A tenant kubeconfig naming the in-cluster Service is pointed at a LoadBalancer address once
// MetalLB (here: a status write, as MetalLB makes it) gives one, with TLS still verified
// against the Service name the apiserver certificate carries.
func TestTenantAccessThroughALoadBalancer(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "kind-tenant"})
	c, err := cluster.New("management", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := "tenant-test"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, "kubernetes-t1-e2e-lb", metav1.GetOptions{})
			if err == nil {
				svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.255.200"}}
				if _, err := c.Kube.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err == nil {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	in := &rest.Config{Host: "https://kubernetes-t1.tenant-test.svc:6443", BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	out, err := TenantAccess(c, nil)(ctx, ns, "kubernetes-t1-admin-kubeconfig", in)
	if err != nil {
		t.Fatal(err)
	}
	if out.Host != "https://172.18.255.200:6443" || out.ServerName != "kubernetes-t1.tenant-test.svc" || out.Insecure || string(out.CAData) != "ca" || out.BearerToken != "t" {
		t.Fatalf("rewritten config: host %s server name %q insecure %t", out.Host, out.ServerName, out.Insecure)
	}
	if in.Host != "https://kubernetes-t1.tenant-test.svc:6443" {
		t.Fatal("the caller's config was changed")
	}
	svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, "kubernetes-t1-e2e-lb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.Selector["kamaji.clastix.io/name"] != "kubernetes-t1" || svc.Labels[TenantLBLabel] != "kubernetes-t1" {
		t.Fatalf("service: %+v", svc.Spec)
	}
	// A second tenant client reuses the Service.
	if _, err := TenantAccess(c, nil)(ctx, ns, "kubernetes-t1-kubeconfig", in); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if _, err := TenantAccess(c, nil)(short, ns, "kubernetes-t2-admin-kubeconfig", in); err == nil {
		t.Fatal("a Service that never got an address passed")
	}
}
