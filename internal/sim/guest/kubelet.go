package guest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/sim/bootdata"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

// certificateWait bounds how long the guest's kubelet waits for its CSR to be signed (the real
// kubelet waits an hour; the tenant's kube-controller-manager approves and signs at once when
// the bootstrap-token RBAC is in place).
const certificateWait = 2 * time.Minute

// kubeletRestart is how long Talos waits before it starts a kubelet that exited again: the
// kubelet service restarts forever, 5 s apart (siderolabs/talos v1.13.6
// internal/app/machined/pkg/system/services/kubelet.go:190,216 restart.Forever;
// internal/app/machined/pkg/system/runner/restart/restart.go:77-81 RestartInterval).
const kubeletRestart = 5 * time.Second

// kubelet is a Talos worker's kubelet service until its TLS bootstrap succeeds. Talos runs the
// kubelet with `RotateCertificates` (siderolabs/talos v1.13.6
// internal/app/machined/pkg/controllers/k8s/kubelet_spec.go:303), so the bootstrap is the
// certificate manager's, retried in the background (k8s.io/client-go v0.35.4
// util/certificate/certificate_manager.go:454-462, `ExponentialBackoffWithContext`), with the
// private key it keeps, so a token the tenant holds only later is still taken, under the same
// CSR name. The sim retries kubeletRestart apart. A kubelet that has had no certificate for five
// minutes while the apiserver answers it (a refused token) exits (k8s.io/kubernetes v1.35.6
// cmd/kubelet/app/server.go:987-990, `UpdateTransport`; pkg/kubelet/certificate/transport.go:114-124,
// "the server is responsive, exiting"), and machined says so on the console and starts it
// again: the sim says that line (kubeletExited) at the
// first refusal by the apiserver and then about once a minute, sooner than the real five
// minutes; an error with no answer from the apiserver (a CA that does not verify it, an endpoint
// it cannot reach) shows nothing on the console, as on Talos. The first failure is the join's
// refusal (refused); later ones go to the guest log about once a minute, and a late success
// too. It returns nil when ctx ends first.
func (gu *guest) kubelet(ctx context.Context, pool standin.Pool, d bootdata.Data, node string) client.Client {
	vmi := gu.vmi
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		gu.g.logf("VMI %s/%s: the kubelet cannot make its key: %v", vmi.Namespace, vmi.Name, err)
		return nil
	}
	for attempt := 1; ; attempt++ {
		c, err := gu.tlsBootstrap(ctx, d, node, key)
		if err == nil {
			if attempt > 1 {
				gu.g.logf("VMI %s/%s: the kubelet's TLS bootstrap succeeded at attempt %d", vmi.Namespace, vmi.Name, attempt)
			}
			return c
		}
		if ctx.Err() != nil {
			return nil
		}
		var status apierrors.APIStatus
		answered := errors.As(err, &status) // the apiserver answered: the kubelet exits in time
		switch {
		case attempt == 1:
			if answered {
				gu.con.say(kubeletExited(err))
			}
			gu.refused(pool, d, err)
		case attempt%12 == 1: // about once a minute
			if answered {
				gu.con.say(kubeletExited(err))
			}
			gu.g.logf("VMI %s/%s: the kubelet's TLS bootstrap still fails (attempt %d): %v", vmi.Namespace, vmi.Name, attempt, err)
		}
		if !sleep(ctx, kubeletRestart) {
			return nil
		}
	}
}

// tlsBootstrap is a Talos worker's kubelet TLS bootstrap with the bootstrap kubeconfig Talos
// writes from its machine configuration: server cluster.controlPlane.endpoint, trusted by
// cluster.ca.crt, authenticated by the bootstrap token cluster.token. It posts the node-client
// CSR as the kubelet does (k8s.io/kubernetes v1.35.4 pkg/kubelet/certificate/bootstrap/
// bootstrap.go:317-361: an ECDSA key, subject system:node:<name> in system:nodes, usages digital
// signature and client auth, signer kubernetes.io/kube-apiserver-client-kubelet, the name
// digested from key, subject and usages), waits for the tenant to sign it, and returns a client
// that authenticates as the node with the issued certificate. The tenant control plane decides:
// an endpoint it is not behind, a CA it is not signed by, a token it does not hold, each fails
// here, and no Node registers.
func (gu *guest) tlsBootstrap(ctx context.Context, d bootdata.Data, node string, key *ecdsa.PrivateKey) (client.Client, error) {
	addr, serverName, err := route(ctx, gu.g.c, d)
	if err != nil {
		return nil, err
	}
	if len(d.ClusterCA) == 0 {
		return nil, fmt.Errorf("no cluster CA to trust the apiserver by (cluster.ca.crt)")
	}
	if d.BootstrapToken == "" {
		return nil, fmt.Errorf("no bootstrap token (cluster.token)")
	}
	tls := rest.TLSClientConfig{CAData: d.ClusterCA, ServerName: serverName}
	boot := &rest.Config{Host: "https://" + addr, BearerToken: d.BootstrapToken, TLSClientConfig: tls, Timeout: 10 * time.Second}
	cs, err := kubernetes.NewForConfig(boot)
	if err != nil {
		return nil, err
	}
	subject := &pkix.Name{Organization: []string{"system:nodes"}, CommonName: "system:node:" + node}
	csrPEM, err := certutil.MakeCSR(key, subject, nil, nil)
	if err != nil {
		return nil, err
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	name, err := digestedName(key.Public(), subject, usages)
	if err != nil {
		return nil, err
	}
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, cs, csrPEM, name, certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, certificateWait)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, cs, reqName, reqUID)
	if err != nil {
		return nil, fmt.Errorf("certificate signing request %s: %w", reqName, err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	tls.CertData, tls.KeyData = certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	nodeCluster, err := cluster.New("node "+node, &rest.Config{Host: boot.Host, TLSClientConfig: tls})
	if err != nil {
		return nil, err
	}
	return nodeCluster.Client, nil
}

// digestedName is the kubelet's CSR name for a key, subject and usages
// (pkg/kubelet/certificate/bootstrap/bootstrap.go:368-399): node-csr-<base64url of a SHA-512/256
// over each part base64url-encoded and followed by "|">.
func digestedName(publicKey crypto.PublicKey, subject *pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	hash := sha512.New512_256()
	const delimiter = '|'
	encode := base64.RawURLEncoding.EncodeToString
	write := func(data []byte) {
		_, _ = hash.Write([]byte(encode(data)))
		_, _ = hash.Write([]byte{delimiter})
	}
	der, err := x509.MarshalPKIXPublicKey(publicKey)
	if err != nil {
		return "", err
	}
	write(der)
	write([]byte(subject.CommonName))
	for _, v := range subject.Organization {
		write([]byte(v))
	}
	for _, v := range usages {
		write([]byte(v))
	}
	return fmt.Sprintf("node-csr-%s", encode(hash.Sum(nil))), nil
}
