// Package certmanager stands in for cert-manager (the platform ships v1.20.2) for what the
// Cozystack Kubernetes chart asks of it: a Certificate issued by a namespaced Issuer that is
// selfSigned, or a ca Issuer signing with its CA Secret. The Certificate's Secret
// (kubernetes.io/tls: tls.crt, tls.key, ca.crt, with cert-manager's annotations) is written from
// the Certificate's commonName, dnsNames, ipAddresses, isCA, duration and privateKey algorithm,
// and the Certificate turns Ready (cert-manager.io/v1 CertificateStatus: conditions, notBefore,
// notAfter, revision). Nothing is renewed: a run is shorter than any duration.
package certmanager

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Kinds it reads.
var (
	CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	IssuerGVK      = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"}
)

// Setup registers the Certificate reconciler on mgr.
func Setup(mgr manager.Manager) error {
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(CertificateGVK)
	return ctrl.NewControllerManagedBy(mgr).Named("sim-cert-manager").For(cert).Complete(&issuer{c: mgr.GetClient()})
}

type issuer struct{ c client.Client }

// certSpec is the part of a Certificate's spec this stand-in reads.
type certSpec struct {
	SecretName  string   `json:"secretName"`
	CommonName  string   `json:"commonName"`
	DNSNames    []string `json:"dnsNames"`
	IPAddresses []string `json:"ipAddresses"`
	IsCA        bool     `json:"isCA"`
	Duration    string   `json:"duration"`
	PrivateKey  struct {
		Algorithm string `json:"algorithm"`
	} `json:"privateKey"`
	IssuerRef struct {
		Name  string `json:"name"`
		Kind  string `json:"kind"`
		Group string `json:"group"`
	} `json:"issuerRef"`
}

func (r *issuer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(CertificateGVK)
	if err := r.c.Get(ctx, req.NamespacedName, cert); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var spec certSpec
	raw, _, _ := unstructured.NestedMap(cert.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return ctrl.Result{}, err
	}
	var existing corev1.Secret
	err := r.c.Get(ctx, client.ObjectKey{Namespace: cert.GetNamespace(), Name: spec.SecretName}, &existing)
	if err == nil && len(existing.Data[corev1.TLSCertKey]) > 0 {
		return ctrl.Result{}, r.ready(ctx, cert, existing.Data[corev1.TLSCertKey])
	}
	if !apierrors.IsNotFound(err) && err != nil {
		return ctrl.Result{}, err
	}
	signer, signerCert, err := r.signer(ctx, cert.GetNamespace(), spec)
	if err != nil {
		return ctrl.Result{RequeueAfter: time.Second}, nil // the CA Secret is not issued yet
	}
	key, err := newKey(spec.PrivateKey.Algorithm)
	if err != nil {
		return ctrl.Result{}, err
	}
	tmpl := certTemplate(spec)
	parent, parentKey := tmpl, crypto.Signer(key)
	if signer != nil {
		parent, parentKey = signerCert, signer
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return ctrl.Result{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return ctrl.Result{}, err
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	caPEM := crt
	if signerCert != nil {
		caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: signerCert.Raw})
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cert.GetNamespace(), Name: spec.SecretName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.c, sec, func() error {
		sec.Type = corev1.SecretTypeTLS
		if sec.Annotations == nil {
			sec.Annotations = map[string]string{}
		}
		for k, v := range map[string]string{"cert-manager.io/certificate-name": cert.GetName(), "cert-manager.io/issuer-name": spec.IssuerRef.Name,
			"cert-manager.io/issuer-kind": "Issuer", "cert-manager.io/issuer-group": "cert-manager.io", "cert-manager.io/common-name": spec.CommonName} {
			sec.Annotations[k] = v
		}
		sec.Data = map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), "ca.crt": caPEM}
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.ready(ctx, cert, crt)
}

// certTemplate is the certificate spec asks for: its names and addresses, valid from a minute
// ago for its duration (cert-manager's 90 days when unset or unreadable), a CA that signs
// certificates or a serving certificate.
func certTemplate(spec certSpec) *x509.Certificate {
	duration := 90 * 24 * time.Hour // cert-manager's default
	if spec.Duration != "" {
		if d, err := time.ParseDuration(spec.Duration); err == nil {
			duration = d
		}
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: spec.CommonName}, DNSNames: spec.DNSNames,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(duration), IsCA: spec.IsCA, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	for _, ip := range spec.IPAddresses {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if spec.IsCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	return tmpl
}

// signer is the CA a ca Issuer signs with; nil for a selfSigned Issuer.
func (r *issuer) signer(ctx context.Context, ns string, spec certSpec) (crypto.Signer, *x509.Certificate, error) {
	if spec.IssuerRef.Kind != "" && spec.IssuerRef.Kind != "Issuer" {
		return nil, nil, fmt.Errorf("issuer kind %s: the sim issues from namespaced Issuers only", spec.IssuerRef.Kind)
	}
	iss := &unstructured.Unstructured{}
	iss.SetGroupVersionKind(IssuerGVK)
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: spec.IssuerRef.Name}, iss); err != nil {
		return nil, nil, err
	}
	if _, self, _ := unstructured.NestedMap(iss.Object, "spec", "selfSigned"); self {
		return nil, nil, nil
	}
	caSecret, _, _ := unstructured.NestedString(iss.Object, "spec", "ca", "secretName")
	if caSecret == "" {
		return nil, nil, fmt.Errorf("issuer %s is neither selfSigned nor ca", iss.GetName())
	}
	var s corev1.Secret
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: caSecret}, &s); err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	kb, _ := pem.Decode(s.Data[corev1.TLSPrivateKeyKey])
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("CA secret %s holds no PEM pair", caSecret)
	}
	caCert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("the CA key cannot sign")
	}
	return signer, caCert, nil
}

// ready reports the Certificate issued.
func (r *issuer) ready(ctx context.Context, cert *unstructured.Unstructured, crtPEM []byte) error {
	if s, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions"); len(s) > 0 {
		return nil
	}
	b, _ := pem.Decode(crtPEM)
	if b == nil {
		return errors.New("issued certificate is not PEM")
	}
	parsed, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(cert.DeepCopy())
	now := time.Now().UTC().Format(time.RFC3339)
	cert.Object["status"] = map[string]any{
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "Certificate is up to date and has not expired",
			"lastTransitionTime": now, "observedGeneration": cert.GetGeneration()}},
		"notBefore": parsed.NotBefore.UTC().Format(time.RFC3339), "notAfter": parsed.NotAfter.UTC().Format(time.RFC3339), "revision": int64(1),
	}
	return r.c.Status().Patch(ctx, cert, patch)
}

func newKey(algorithm string) (crypto.Signer, error) {
	switch algorithm {
	case "Ed25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	case "ECDSA":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default: // RSA, cert-manager's default
		return rsa.GenerateKey(rand.Reader, 2048)
	}
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
