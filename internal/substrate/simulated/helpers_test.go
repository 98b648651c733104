package simulated_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/testkit"
)

func errorf(f string, a ...any) error { return fmt.Errorf(f, a...) }

func cond(o *unstructured.Unstructured, typ string) (string, string) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["message"])
		}
	}
	return "", ""
}

func readyTrue(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return err
	}
	if s, m := cond(o, "Ready"); s != "True" {
		return fmt.Errorf("Ready %q: %s", s, m)
	}
	return nil
}

func readyFalse(ctx context.Context, c client.Client, o *unstructured.Unstructured, contains string) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return err
	}
	if s, m := cond(o, "Ready"); s != "False" || !strings.Contains(m, contains) {
		return fmt.Errorf("Ready %q: %s", s, m)
	}
	return nil
}

func TestMain(m *testing.M) { testkit.Main(m) }
