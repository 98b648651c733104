package simulated

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The sim serves a VMI's console subresource as KubeVirt does: a VMI that does not run is
// refused with virt-api's words, a caller without RBAC for virtualmachineinstances/console is
// forbidden, and a person's `virtctl console` takes the console from the harness, which does not
// take it back: the person keeps reading while the guest goes on printing.
func TestAPersonsConsoleTakesItFromTheHarnessForGood(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "sim-console",
		Users: []controlplane.User{{Name: "harness", Groups: []string{"system:masters"}, Token: "harness-token"}, {Name: "nobody", Token: "nobody-token"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mc, err := cluster.New("management", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	simtest.InstallCRDs(ctx, t, mc.Client)
	ports := &simenv.SerialPorts{}
	px, err := startProxy(api, api.Admin(), &simenv.Env{Serial: ports}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer px.close()
	via := func(token string) *rest.Config {
		return &rest.Config{Host: px.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: px.CA.CertPEM}}
	}
	c, err := cluster.New("management", via("harness-token"))
	if err != nil {
		t.Fatal(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm-1", Namespace: "default"}}
	if err := c.Client.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	dial := serialconsole.SubresourceDialer(c.REST)
	if _, err := dial(ctx, "default", "vm-1"); err == nil || !strings.Contains(err.Error(), "VMI is not running") {
		t.Fatalf("a VMI that does not run: %v", err)
	}
	vmi.Status.Phase = kubevirtv1.Running
	if err := c.Client.Status().Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	if _, err := serialconsole.SubresourceDialer(via("nobody-token"))(ctx, "default", "vm-1"); err == nil || !strings.Contains(err.Error(), "is forbidden") {
		t.Fatalf("a caller without RBAC: %v", err)
	}

	harness, err := dial(ctx, "default", "vm-1")
	if err != nil {
		t.Fatal(err)
	}
	say := func(line string) { ports.Write("default", "vm-1", string(vmi.UID), []byte(line+"\r\n")) }
	heard := &lines{}
	harnessDone := make(chan error, 1)
	go func() { harnessDone <- heard.read(harness) }()
	testkit.Eventually(t.Context(), t, "the harness reads the guest", 20*time.Second, testkit.Holds(func() bool {
		say("[talos] booting")
		return heard.has("[talos] booting")
	}))

	person, err := dial(ctx, "default", "vm-1")
	if err != nil {
		t.Fatal(err)
	}
	defer person.Close()
	select {
	case <-harnessDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the harness's connection is still open after a person connected")
	}
	theirs := &lines{}
	go func() { _ = theirs.read(person) }()
	testkit.Eventually(t.Context(), t, "the person reads the guest", 20*time.Second, testkit.Holds(func() bool {
		say("[talos] kubelet started")
		return theirs.has("[talos] kubelet started")
	}))
	if heard.has("[talos] kubelet started") {
		t.Fatal("the harness read a line after the person took the console")
	}
}

type lines struct {
	mu   sync.Mutex
	text strings.Builder
}

func (l *lines) read(r io.Reader) error {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		l.mu.Lock()
		l.text.Write(buf[:n])
		l.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

func (l *lines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.text.String(), s)
}
