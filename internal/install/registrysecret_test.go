package install

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// operatorObjects is the generic operator asset as the installer renders it, with the
// --platform-source-url the template always gives the operator
// (packages/core/installer/templates/cozystack-operator.yaml:190 at cozystack main).
func operatorObjects(t *testing.T) []Object {
	t.Helper()
	m, err := Fetch(context.Background(), filepath.Join("testdata", OperatorAsset), "")
	if err != nil {
		t.Fatal(err)
	}
	m.Data = []byte(strings.Replace(string(m.Data), "args: [--leader-elect=true, --install-flux=true, --install-crds=true]",
		"args: [--leader-elect=true, --install-flux=true, --install-crds=true, --platform-source-url=oci://registry.example/pr/cozystack-packages]", 1))
	objs, err := m.Objects()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func operatorArgs(t *testing.T, objs []Object) []string {
	t.Helper()
	for _, o := range objs {
		cs, _, _ := unstructured.NestedSlice(o.Obj.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
			for _, a := range args {
				if strings.HasPrefix(a, "--platform-source-url=") {
					return args
				}
			}
		}
	}
	t.Fatal("no operator container")
	return nil
}

// The registry's credentials reach the operator as the one place it reads them: the Secret its
// --platform-source-secret names, which it sets as the packages OCIRepository's secretRef
// (cmd/cozystack-operator/main.go:143, 594-598). A manifest that names another Secret, or has
// no operator, is refused.
func TestThePlatformSourceSecretIsNamedToTheOperator(t *testing.T) {
	objs := operatorObjects(t)
	if err := SetPlatformSourceSecret(objs, "cozy-e2e-registry"); err != nil {
		t.Fatal(err)
	}
	args := operatorArgs(t, objs)
	if args[len(args)-1] != "--platform-source-secret=cozy-e2e-registry" {
		t.Fatalf("operator args %v", args)
	}
	if err := SetPlatformSourceSecret(objs, "cozy-e2e-registry"); err != nil || len(operatorArgs(t, objs)) != len(args) {
		t.Fatalf("naming it again: %v %v", err, operatorArgs(t, objs))
	}
	if err := SetPlatformSourceSecret(objs, "other"); err == nil || !strings.Contains(err.Error(), "already runs with --platform-source-secret=cozy-e2e-registry") {
		t.Fatalf("another Secret: %v", err)
	}
	if err := SetPlatformSourceSecret(objs[:1], "x"); err == nil || !strings.Contains(err.Error(), "no Deployment runs the operator") {
		t.Fatalf("no operator: %v", err)
	}
}
