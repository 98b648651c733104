package controlplane

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// User is a token-authenticated user of an apiserver. Tokens pass through TLS-terminating
// proxies unchanged, which client certificates do not.
type User struct {
	Name   string
	Groups []string
	Token  string
}

// APIServerOptions configure one kube-apiserver.
type APIServerOptions struct {
	// Name appears in logs and errors ("management", "tenant-test/kubernetes-t1").
	Name string
	// Dir holds certificates, kubeconfigs and the log; it must exist.
	Dir     string
	EtcdURL string
	// EtcdPrefix separates apiservers sharing one etcd (default /registry).
	EtcdPrefix string
	// ServiceCIDR is the Service ClusterIP range (default 10.96.0.0/16).
	ServiceCIDR string
	// Users are token users besides the admin (who has a client certificate and a token).
	Users []User
	// ExtraArgs are appended verbatim ("--feature-gates=...").
	ExtraArgs []string
	// SANs are names and addresses the serving certificate holds besides loopback and the
	// in-cluster kubernetes names (a tenant apiserver's Service names, as Kamaji's has).
	SANs []string
	// AdvertiseAddress, when set, is an address of this host the apiserver also listens on and
	// publishes as the endpoint of the default namespace's kubernetes Service, so Pods that dial
	// the Service (through kube-proxy) reach it; without it the apiserver stays on loopback.
	AdvertiseAddress string
	// Started, when set, is called once the process started with its address and credentials
	// known, before it answers: a caller that publishes the credentials early (as Kamaji writes
	// a tenant's admin kubeconfig before its control plane runs) does it there.
	Started func(*APIServer) error
}

// APIServer is a running kube-apiserver on loopback.
type APIServer struct {
	Process
	Name string
	// URL is https://127.0.0.1:<port>.
	URL string
	CA  *CA
	// FrontProxyCA signed the client certificate this apiserver calls extension apiservers
	// with; they trust it through the extension-apiserver-authentication ConfigMap in
	// kube-system, which the apiserver publishes.
	FrontProxyCA *CA
	// CAKeyPath and CACertPath let kube-controller-manager sign CSRs with the cluster CA.
	CACertPath, CAKeyPath string
	// ServiceAccountKeyPath is the token signing key, for kube-controller-manager.
	ServiceAccountKeyPath string
	// AdminKubeconfig is a kubeconfig file for the admin (system:masters).
	AdminKubeconfig string
	admin           *rest.Config
	users           map[string]User
}

// StartAPIServer starts kube-apiserver against etcd and waits until /readyz answers ok.
func StartAPIServer(ctx context.Context, tools Tools, o APIServerOptions) (*APIServer, error) {
	if o.EtcdPrefix == "" {
		o.EtcdPrefix = "/registry"
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = "10.96.0.0/16"
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	ca, err := NewCA(o.Name + "-ca")
	if err != nil {
		return nil, err
	}
	p := func(name string) string { return filepath.Join(o.Dir, name) }
	// A Pod dials the kubernetes Service's ClusterIP, the first address of the range
	// (k8s.io/kubernetes v1.35.4 pkg/controlplane/apiserver/options/options.go:366-385,
	// ServiceIPRange: GetIndexedIP(range, 1)), so the certificate holds it.
	serviceIP, err := firstServiceIP(o.ServiceCIDR)
	if err != nil {
		return nil, fmt.Errorf("apiserver %s: ServiceCIDR %q: %w", o.Name, o.ServiceCIDR, err)
	}
	bind, advertise := "127.0.0.1", "127.0.0.1"
	sans := append([]string{"127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", serviceIP}, o.SANs...)
	if o.AdvertiseAddress != "" {
		bind, advertise = "0.0.0.0", o.AdvertiseAddress
		sans = append(sans, o.AdvertiseAddress)
	}
	admin, users, err := writeAPIServerSecrets(o, ca, sans)
	if err != nil {
		return nil, err
	}
	frontProxyCA, aggregation, err := frontProxy(o.Dir, o.Name)
	if err != nil {
		return nil, err
	}
	if err := writeKubeletClient(o.Dir, ca); err != nil {
		return nil, err
	}
	a := &APIServer{
		Name: o.Name, URL: fmt.Sprintf("https://127.0.0.1:%d", port), CA: ca, FrontProxyCA: frontProxyCA,
		CACertPath: p("ca.crt"), CAKeyPath: p("ca.key"), ServiceAccountKeyPath: p("sa.key"),
		AdminKubeconfig: p("admin.kubeconfig"), users: users,
	}
	a.admin = &rest.Config{
		Host:            a.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM, CertData: admin.CertPEM, KeyData: admin.KeyPEM},
	}
	if err := cluster.WriteKubeconfig(a.AdminKubeconfig, o.Name, a.admin); err != nil {
		return nil, err
	}
	args := append(apiServerArgs(o, bind, advertise, port), aggregation...)
	a.Process = Process{Name: "kube-apiserver " + o.Name, Path: tools.Path("kube-apiserver"), LogPath: p("kube-apiserver.log"),
		Args: append(args, o.ExtraArgs...)}
	if err := a.Start(); err != nil {
		return nil, err
	}
	if o.Started != nil {
		if err := o.Started(a); err != nil {
			a.Stop(5 * time.Second)
			return nil, err
		}
	}
	if err := a.waitReady(ctx); err != nil {
		a.Stop(5 * time.Second)
		return nil, err
	}
	return a, nil
}

// writeAPIServerSecrets signs the serving certificate for sans and the admin's client
// certificate, and writes into o.Dir the CA, the service account key, the token file (the
// admin's token and o.Users') and the serving pair. It returns the admin's pair and the token
// users by name.
func writeAPIServerSecrets(o APIServerOptions, ca *CA, sans []string) (KeyPair, map[string]User, error) {
	p := func(name string) string { return filepath.Join(o.Dir, name) }
	serving, err := ca.Serving("kube-apiserver", sans...)
	if err != nil {
		return KeyPair{}, nil, err
	}
	admin, err := ca.Client("admin", "system:masters")
	if err != nil {
		return KeyPair{}, nil, err
	}
	caKey, err := keyPEMOf(ca)
	if err != nil {
		return KeyPair{}, nil, err
	}
	saKey, err := NewSigningKey()
	if err != nil {
		return KeyPair{}, nil, err
	}
	adminToken := randomToken()
	users := map[string]User{"admin": {Name: "admin", Groups: []string{"system:masters"}, Token: adminToken}}
	var tokens strings.Builder
	fmt.Fprintf(&tokens, "%s,admin,admin,\"system:masters\"\n", adminToken)
	for _, u := range o.Users {
		users[u.Name] = u
		fmt.Fprintf(&tokens, "%s,%s,%s,\"%s\"\n", u.Token, u.Name, u.Name, strings.Join(u.Groups, ","))
	}
	files := map[string][]byte{
		"ca.crt": ca.CertPEM, "ca.key": caKey, "sa.key": saKey, "tokens.csv": []byte(tokens.String()),
	}
	for name, data := range files {
		if err := os.WriteFile(p(name), data, 0o600); err != nil {
			return KeyPair{}, nil, err
		}
	}
	if err := serving.Write(p("apiserver.crt"), p("apiserver.key")); err != nil {
		return KeyPair{}, nil, err
	}
	return admin, users, nil
}

// writeKubeletClient signs and writes into dir the client certificate the apiserver calls
// kubelets with.
func writeKubeletClient(dir string, ca *CA) error {
	// The client certificate it calls kubelets with (logs, exec, port-forward), as kubeadm issues
	// it (k8s.io/kubernetes v1.35.4 cmd/kubeadm/app/phases/certs/certlist.go:311-326: common name
	// kube-apiserver-kubelet-client, organization kubeadm:cluster-admins,
	// cmd/kubeadm/app/constants/constants.go:78,211) and
	// passes it with the address types it prefers (phases/controlplane/manifests.go:196-201).
	kubeletClient, err := ca.Client("kube-apiserver-kubelet-client", "kubeadm:cluster-admins")
	if err != nil {
		return err
	}
	return kubeletClient.Write(filepath.Join(dir, "apiserver-kubelet-client.crt"), filepath.Join(dir, "apiserver-kubelet-client.key"))
}

// apiServerArgs are kube-apiserver's flags for o, listening on bind:port and advertising
// advertise, with the files writeAPIServerSecrets and writeKubeletClient wrote into o.Dir
// (without the aggregation flags and o.ExtraArgs).
func apiServerArgs(o APIServerOptions, bind, advertise string, port int) []string {
	p := func(name string) string { return filepath.Join(o.Dir, name) }
	return []string{
		"--etcd-servers=" + o.EtcdURL, "--etcd-prefix=" + o.EtcdPrefix,
		"--bind-address=" + bind, "--advertise-address=" + advertise, fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + o.Dir, "--tls-cert-file=" + p("apiserver.crt"), "--tls-private-key-file=" + p("apiserver.key"),
		"--client-ca-file=" + p("ca.crt"), "--token-auth-file=" + p("tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file=" + p("sa.key"),
		"--service-account-signing-key-file=" + p("sa.key"),
		"--service-cluster-ip-range=" + o.ServiceCIDR,
		"--kubelet-client-certificate=" + p("apiserver-kubelet-client.crt"), "--kubelet-client-key=" + p("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--authorization-mode=Node,RBAC", "--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false", "--v=1",
	}
}

func (a *APIServer) waitReady(ctx context.Context) error {
	rt, err := rest.TransportFor(a.admin)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: rt, Timeout: 2 * time.Second}
	return a.WaitFor(ctx, "ready (/readyz)", Readyz(hc, a.URL))
}

// Admin is a REST config for the admin user (client certificate, system:masters).
func (a *APIServer) Admin() *rest.Config { return rest.CopyConfig(a.admin) }

// ServiceAccountKubeconfig writes a kubeconfig file at path for the identity the apiserver gives
// service account name of namespace ns (a client certificate with its user name and groups:
// k8s.io/apiserver v0.35.4 pkg/authentication/serviceaccount/util.go:55-58 MakeUsername and :104-114
// MakeGroupNames), for a component that runs outside a Pod as its Pod would: RBAC and the
// webhooks that tell its service account from others (KubeVirt's virt-api keeps status updates of
// its own service accounts only) see it as they see the Pod.
func (a *APIServer) ServiceAccountKubeconfig(ns, name, path string) error {
	user := "system:serviceaccount:" + ns + ":" + name
	kp, err := a.CA.Client(user, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	if err != nil {
		return err
	}
	cfg := &rest.Config{Host: a.URL, TLSClientConfig: rest.TLSClientConfig{CAData: a.CA.CertPEM, CertData: kp.CertPEM, KeyData: kp.KeyPEM}}
	return cluster.WriteKubeconfig(path, user, cfg)
}

// UserConfig is a REST config for a token user declared in the options ("admin" included).
func (a *APIServer) UserConfig(name string) (*rest.Config, error) {
	u, ok := a.users[name]
	if !ok {
		return nil, fmt.Errorf("apiserver %s has no user %q", a.Name, name)
	}
	return &rest.Config{Host: a.URL, BearerToken: u.Token, TLSClientConfig: rest.TLSClientConfig{CAData: a.CA.CertPEM}}, nil
}

func keyPEMOf(ca *CA) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

// firstServiceIP is the first address of an IPv4 Service range, the kubernetes Service's.
func firstServiceIP(cidr string) (string, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return "", err
	}
	ip := n.IP.To4()
	if ip == nil {
		return "", fmt.Errorf("not an IPv4 range")
	}
	next := make(net.IP, 4)
	copy(next, ip)
	next[3]++
	return next.String(), nil
}
