package controlplane_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// An extension apiserver registered by an APIService is reached through kube-apiserver, as
// virt-api's subresources are: the apiserver publishes its front-proxy CA in
// kube-system/extension-apiserver-authentication, routes to the Service's endpoint address,
// and calls the extension with the front-proxy client certificate and the caller's name and
// groups in X-Remote-User and X-Remote-Group.
func TestAnAPIServiceIsReachedThroughTheAggregator(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "aggr"})
	c, err := cluster.New("aggr", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// What the apiserver tells extensions to trust.
	var auth corev1.ConfigMap
	if err := api.WaitFor(ctx, "publishing kube-system/extension-apiserver-authentication", func(ctx context.Context) error {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "extension-apiserver-authentication"}, &auth)
	}); err != nil {
		t.Fatal(err)
	}
	if got := auth.Data["requestheader-client-ca-file"]; got != string(api.FrontProxyCA.CertPEM) {
		t.Errorf("extension-apiserver-authentication requestheader-client-ca-file is not the front-proxy CA:\n%s", got)
	}
	if got := auth.Data["requestheader-allowed-names"]; got != `["front-proxy-client"]` {
		t.Errorf("extension-apiserver-authentication requestheader-allowed-names = %s, want [\"front-proxy-client\"]", got)
	}

	// The extension: HTTPS on an address of this host that is not loopback (an EndpointSlice
	// may not name loopback), trusting the front-proxy CA for its callers.
	ip := hostAddress(t)
	ca, err := controlplane.NewCA("extension-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving("echo.default.svc", ip, "echo.default.svc")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	callers := x509.NewCertPool()
	callers.AppendCertsFromPEM(api.FrontProxyCA.CertPEM)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: callers, ClientAuth: tls.RequireAndVerifyClientCert},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cn := r.TLS.PeerCertificates[0].Subject.CommonName
			w.Header().Set("Content-Type", "application/json")
			if r.URL.Path == "/apis/e2e.test.example/v1" {
				_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
					TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
					GroupVersion: "e2e.test.example/v1",
					APIResources: []metav1.APIResource{{Name: "echoes", Namespaced: true, Kind: "Echo", Verbs: []string{"get"}}},
				})
				return
			}
			line := fmt.Sprintf("%s %s as %s: user %s groups %s", r.Method, r.URL.Path, cn, r.Header.Get("X-Remote-User"), strings.Join(r.Header.Values("X-Remote-Group"), ","))
			_ = json.NewEncoder(w).Encode(map[string]string{"kind": "Status", "apiVersion": "v1", "status": "Success", "message": line})
		}),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	objs := []client.Object{
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "echo-1", Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port))}},
		},
		apiService("v1.e2e.test.example", "e2e.test.example", "v1", "default", "echo", ca.CertPEM),
	}
	for _, o := range objs {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	start := time.Now()
	if err := api.WaitFor(ctx, "APIService v1.e2e.test.example Available", func(ctx context.Context) error {
		return available(ctx, c.Client, "v1.e2e.test.example")
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("APIService Available in %s", time.Since(start).Round(time.Millisecond))

	body, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/apis/e2e.test.example/v1/namespaces/default/echoes/one/console").DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET through the aggregator: %v (%s)", err, body)
	}
	want := "GET /apis/e2e.test.example/v1/namespaces/default/echoes/one/console as front-proxy-client: user admin groups system:masters,system:authenticated"
	if !strings.Contains(string(body), want) {
		t.Errorf("the extension saw %s, want %q", body, want)
	}
}

func apiService(name, group, version, ns, svc string, caBundle []byte) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"group": group, "version": version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service":  map[string]any{"namespace": ns, "name": svc, "port": int64(443)},
			"caBundle": caBundle,
		},
	}}
}

// available is nil once the APIService is Available=True, else its condition.
func available(ctx context.Context, c client.Client, name string) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiregistration.k8s.io/v1")
	u.SetKind("APIService")
	if err := c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		if m["type"] == "Available" {
			if m["status"] == "True" {
				return nil
			}
			return fmt.Errorf("Available=%v %v: %v", m["status"], m["reason"], m["message"])
		}
	}
	return fmt.Errorf("no Available condition yet")
}

// hostAddress is an IPv4 address of this host that is not loopback: the address an
// extension's Pod has on a node.
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	msg := "this host has no IPv4 address besides loopback for the extension to listen on"
	testkit.Unavailable(t, msg)
	return ""
}
