package suiterun

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The tenant chart binds, in tenant-e2e1, the ServiceAccounts of the tenant and its parents
// (cozy:tenant), and per access level the groups of the tenant and of tenant-root (cozystack
// v1.6.1 packages/apps/tenant/templates/tenant.yaml, cozy-lib _rbac.tpl); a Kubernetes app binds
// Roles of its own. The member to act as is in the tenant's own group, whichever binding or
// order names a parent's group first.
func TestTenantGroupIsTheTenantsOwn(t *testing.T) {
	group := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	sa := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: name}
	}
	binding := func(name, kind string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
		return rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-e2e1"},
			RoleRef: rbacv1.RoleRef{Kind: kind, Name: name}, Subjects: subjects}
	}
	for _, tc := range []struct {
		name string
		rbs  []rbacv1.RoleBinding
		want string
	}{
		{"the chart's order", []rbacv1.RoleBinding{
			binding("cozy:tenant", "ClusterRole", sa("tenant-root"), sa("tenant-e2e1")),
			binding("cozy:tenant:admin", "ClusterRole", sa("tenant-e2e1"), group("tenant-e2e1-admin"), group("tenant-e2e1-super-admin"),
				sa("tenant-root"), group("tenant-root-admin"), group("tenant-root-super-admin")),
		}, "tenant-e2e1-admin"},
		{"a parent's group first", []rbacv1.RoleBinding{
			binding("kubernetes-x-dashboard", "Role", group("tenant-e2e1-view")),
			binding("cozy:tenant:admin", "ClusterRole", group("tenant-root-admin"), group("tenant-e2e1-admin")),
		}, "tenant-e2e1-admin"},
		{"only a parent's", []rbacv1.RoleBinding{
			binding("cozy:tenant:admin", "ClusterRole", group("tenant-root-admin")),
		}, "tenant-root-admin"},
		{"none", []rbacv1.RoleBinding{binding("cozy:tenant", "ClusterRole", sa("tenant-e2e1"))}, ""},
	} {
		if _, got := tenantGroup("tenant-e2e1", tc.rbs); got != tc.want {
			t.Errorf("%s: group %q, want %q", tc.name, got, tc.want)
		}
	}
}
