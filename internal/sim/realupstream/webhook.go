package realupstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/yamldoc"
)

// Serving is the TLS identity of one controller's webhook server: a CA of its own, a serving
// certificate for 127.0.0.1 written as tls.crt and tls.key into CertDir (the names
// controller-runtime's webhook server reads from --webhook-cert-dir), and a free port. In a
// cluster cert-manager issues that certificate and injects the CA; a self-signed pair is all
// the servers need.
type Serving struct {
	CertDir string
	Port    int
	CA      *controlplane.CA
}

// NewServing writes a fresh CA and serving certificate into dir (created) and picks a port.
func NewServing(dir, name string) (*Serving, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, port, err := controlplane.WebhookServing(dir, name+"-webhook")
	if err != nil {
		return nil, err
	}
	return &Serving{CertDir: dir, Port: port, CA: ca}, nil
}

// URL is the https URL of path on the webhook server.
func (s *Serving) URL(path string) string { return fmt.Sprintf("https://127.0.0.1:%d%s", s.Port, path) }

// Conversion is this server's /convert endpoint as a CRD conversion webhook.
func (s *Serving) Conversion() *Conversion {
	return &Conversion{URL: s.URL("/convert"), CABundle: s.CA.CertPEM}
}

// answers reports whether the server completes a TLS handshake with its certificate.
func (s *Serving) answers(ctx context.Context) error {
	pool := x509.NewCertPool()
	pool.AddCert(s.CA.Cert)
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
	conn, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", s.Port))
	if err != nil {
		return fmt.Errorf("webhook server on 127.0.0.1:%d: %w", s.Port, err)
	}
	return conn.Close()
}

// InstallWebhookConfigurations installs, and returns, the admission webhook configurations a
// provider ships (its config/webhook/manifests.yaml, as controller-gen writes them from its
// markers), each webhook pointed at the serving URL of its path with the CA bundle instead of
// the in-cluster Service cert-manager would inject a CA for, and each configuration named with
// prefix (the provider's kustomize namePrefix). An existing configuration of that name is
// replaced. They stay when the controller stops: they go with the apiserver.
func InstallWebhookConfigurations(ctx context.Context, c *cluster.Cluster, manifests, prefix string, s *Serving) ([]client.Object, error) {
	data, err := os.ReadFile(manifests)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w; run `make tools`", err)
	}
	docs, err := yamldoc.Split(data)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", manifests, err)
	}
	var objs []client.Object
	for _, doc := range docs {
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("upstream: %s: %w", manifests, err)
		}
		switch head.Kind {
		case "ValidatingWebhookConfiguration":
			v := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				return nil, fmt.Errorf("upstream: %s: %w", manifests, err)
			}
			for i := range v.Webhooks {
				if err := pointAt(&v.Webhooks[i].ClientConfig, s); err != nil {
					return nil, fmt.Errorf("upstream: %s: webhook %s: %w", manifests, v.Webhooks[i].Name, err)
				}
			}
			v.Name = prefix + v.Name
			objs = append(objs, v)
		case "MutatingWebhookConfiguration":
			m := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, m); err != nil {
				return nil, fmt.Errorf("upstream: %s: %w", manifests, err)
			}
			for i := range m.Webhooks {
				if err := pointAt(&m.Webhooks[i].ClientConfig, s); err != nil {
					return nil, fmt.Errorf("upstream: %s: webhook %s: %w", manifests, m.Webhooks[i].Name, err)
				}
			}
			m.Name = prefix + m.Name
			objs = append(objs, m)
		case "":
		default:
			return nil, fmt.Errorf("upstream: %s: unexpected kind %s", manifests, head.Kind)
		}
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("upstream: %s holds no webhook configuration", manifests)
	}
	for _, o := range objs {
		if err := c.Client.Create(ctx, o); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("upstream: installing %s: %w", o.GetName(), err)
			}
			if err := replace(ctx, c, o); err != nil {
				return nil, fmt.Errorf("upstream: replacing %s: %w", o.GetName(), err)
			}
		}
	}
	return objs, nil
}

// deleteAll deletes objs, best effort (a cleanup after a failure that is being reported).
func deleteAll(c *cluster.Cluster, objs []client.Object) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, o := range objs {
		_ = c.Client.Delete(ctx, o)
	}
}

func pointAt(cc *admissionv1.WebhookClientConfig, s *Serving) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return fmt.Errorf("no service path to point at")
	}
	url := s.URL(*cc.Service.Path)
	cc.Service, cc.URL, cc.CABundle = nil, &url, s.CA.CertPEM
	return nil
}

func replace(ctx context.Context, c *cluster.Cluster, o client.Object) error {
	live := o.DeepCopyObject().(client.Object)
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
		return err
	}
	o.SetResourceVersion(live.GetResourceVersion())
	return c.Client.Update(ctx, o)
}
