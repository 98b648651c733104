package kamaji

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// NodeBootstrapTokenAuthGroup is the group a kubeadm-format bootstrap token authenticates in
// (k8s.io/kubernetes v1.35.4 cmd/kubeadm/app/constants/constants.go:181); the Cozystack chart's
// bootstrap-token-tenant Job puts its token there (auth-extra-groups).
const NodeBootstrapTokenAuthGroup = "system:bootstrappers:kubeadm:default-node-token"

// EnsureBootstrapTokenRBAC writes into the tenant what Kamaji's bootstrap-token phase writes
// (clastix/kamaji internal/kubeadm/bootstraptoken.go:27-45, through kubeadm's, k8s.io/kubernetes
// v1.35.4 cmd/kubeadm/app/phases/bootstraptoken/node/tlsbootstrap.go:31-132
// (AllowBootstrapTokensToPostCSRs)): bootstrap tokens may get
// Nodes and post CSRs, their node-client CSRs and the nodes' own renewals are approved by
// kube-controller-manager's csrapprover. With it, a worker's kubelet TLS bootstrap against the
// tenant apiserver works as on the platform: the token authenticates, the CSR is approved and
// signed, and the kubelet registers its Node under its own certificate.
func EnsureBootstrapTokenRBAC(ctx context.Context, c client.Client) error {
	getNodes := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, getNodes, func() error {
		getNodes.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}}}
		return nil
	}); err != nil {
		return fmt.Errorf("ClusterRole %s: %w", getNodes.Name, err)
	}
	bindings := []struct{ name, role, group string }{
		{"kubeadm:get-nodes", "kubeadm:get-nodes", NodeBootstrapTokenAuthGroup},
		{"kubeadm:kubelet-bootstrap", "system:node-bootstrapper", NodeBootstrapTokenAuthGroup},
		{"kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", NodeBootstrapTokenAuthGroup},
		{"kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	}
	for _, b := range bindings {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, c, crb, func() error {
			crb.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role}
			crb.Subjects = []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: b.group}}
			return nil
		}); err != nil {
			return fmt.Errorf("ClusterRoleBinding %s: %w", b.name, err)
		}
	}
	return nil
}
