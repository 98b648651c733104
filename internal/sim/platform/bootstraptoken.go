package platform

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/sim/kamaji"
)

// AdminKubeconfigSvcKey is the key of <release>-admin-kubeconfig the chart's Jobs mount as their
// KUBECONFIG (bootstrap-token-tenant-job.yaml:71-72: /tenant-admin/super-admin.svc).
const AdminKubeconfigSvcKey = "super-admin.svc"

// BootstrapTokenSecret is the bootstrap token Secret the chart's bootstrap-token-tenant Job
// applies into the tenant (bootstrap-token-tenant-job.yaml:106-120): kube-system/
// bootstrap-token-<id>, usable for authentication and signing, in the extra group
// system:bootstrappers:kubeadm:default-node-token, with description; an expiration when it is
// not zero (the chart sets none; k8s.io/cluster-bootstrap v0.35.4 token/api/types.go:44-48,
// BootstrapTokenExpirationKey, RFC3339).
func BootstrapTokenSecret(id, secret, description string, expiration time.Time) *corev1.Secret {
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey: []byte(id), bootstrapapi.BootstrapTokenSecretKey: []byte(secret),
		bootstrapapi.BootstrapTokenDescriptionKey:      []byte(description),
		bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"), bootstrapapi.BootstrapTokenUsageSigningKey: []byte("true"),
		bootstrapapi.BootstrapTokenExtraGroupsKey: []byte(kamaji.NodeBootstrapTokenAuthGroup),
	}
	if !expiration.IsZero() {
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(expiration.UTC().Format(time.RFC3339))
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: bootstrapapi.BootstrapTokenSecretPrefix + id},
		Type: corev1.SecretTypeBootstrapToken, Data: data}
}

// bootstrapTokenTenant does what the chart's bootstrap-token-tenant hook Job does once the
// tenant apiserver answers (bootstrap-token-tenant-job.yaml:106-163): through the tenant admin
// kubeconfig it applies the bootstrap token Secret kube-system/bootstrap-token-<id> (the
// release's talos-secrets bootstrapTokenId and bootstrapTokenSecret, usable for authentication
// and signing, extra group system:bootstrappers:kubeadm:default-node-token) and the Role and
// RoleBinding talos:node-apiserver-endpoint-discovery for system:nodes in default. Done once per
// admin kubeconfig; false until the tenant answers.
func (p *Platform) bootstrapTokenTenant(ctx context.Context, app App, s talosSecrets) (bool, error) {
	release := Release(app.Name)
	var admin corev1.Secret
	if err := p.r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: release + "-admin-kubeconfig"}, &admin); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	key := app.Namespace + "/" + release + "@" + admin.ResourceVersion + "/" + s.BootstrapTokenID
	p.mu.Lock()
	done := p.tokensDone[key]
	p.mu.Unlock()
	if done {
		return true, nil
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(admin.Data[AdminKubeconfigSvcKey])
	if err != nil {
		return false, fmt.Errorf("platform: %s-admin-kubeconfig key %s: %w", release, AdminKubeconfigSvcKey, err)
	}
	tc, err := cluster.New("tenant "+app.Namespace+"/"+release, cfg)
	if err != nil {
		return false, err
	}
	c := tc.Client
	want := BootstrapTokenSecret(s.BootstrapTokenID, s.BootstrapTokenSecret, "Talos worker bootstrap token, managed by cozystack kubernetes chart", time.Time{})
	tok := &corev1.Secret{ObjectMeta: want.ObjectMeta}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, tok, func() error {
		tok.Type, tok.Data = want.Type, want.Data
		return nil
	}); err != nil {
		return false, nil // the tenant apiserver does not answer yet: the Job's pod restarts
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "talos:node-apiserver-endpoint-discovery"}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, role, func() error {
		role.Rules = []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		}
		return nil
	}); err != nil {
		return false, nil
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: role.Name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, rb, func() error {
		rb.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}
		rb.Subjects = []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"}}
		return nil
	}); err != nil {
		return false, nil
	}
	p.mu.Lock()
	p.tokensDone[key] = true
	p.mu.Unlock()
	return true, nil
}
