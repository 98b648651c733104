package sim_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func errorf(f string, a ...any) error { return fmt.Errorf(f, a...) }

func eventually(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %v", what, err, last)
	}
}

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

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestMain(m *testing.M) {
	// The world's controllers log through their manager's logger; controller-runtime's global
	// one is set so it does not print a stack trace into the test output after 30 s.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
