package testbed

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/testkit/tenantenv"
)

// collected is Diagnostics that records what it was asked to collect and names one file.
type collected struct {
	mu    sync.Mutex
	asked []string
}

func (c *collected) StartDiagnostics(context.Context, string) error { return nil }
func (c *collected) WatchPool(tenant.PoolNames)                     {}
func (c *collected) WatchTenant(context.Context, string, tenant.Names, *cluster.Cluster) error {
	return nil
}
func (c *collected) Consoles() *serialconsole.Hub { return nil }
func (c *collected) Collect(_ context.Context, pools []tenant.PoolNames, class verdict.Class, stage string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, verdict.Label(class, stage))
	return []string{"clusters/management/events.jsonl"}
}

// A PVC left in the tenant namespace at the teardown's deadline is a failure of class teardown
// whose evidence the diagnostics the tenant was handed collected, inside the phase and before
// the Tenant app is deleted; the suite is not called back for it.
func TestATeardownLeakCarriesTheEvidenceOfTheDiagnosticsItWasHanded(t *testing.T) {
	env := tenantenv.Start(t)
	d := &collected{}
	tn := laneTenant(t, "sim", Options{Management: env.Cluster, Diagnostics: d})
	l := tn.o.Lane
	i := slices.IndexFunc(l.Budget.Phases, func(p lane.Phase) bool { return p.Name == PhaseTeardown })
	l.Budget.Phases[i].Ceiling = lane.Duration(3 * time.Second)
	tn.o.Clock = budget.New(l.Budget, budget.Options{Lane: l.Name})
	ns := tn.o.Run.Namespace()
	env.Namespace(t, ns)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "vm-md0-disk", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Cluster.Client.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	tn.mu.Lock()
	tn.tenant = true
	tn.mu.Unlock()

	fs := tn.Teardown(ctx)
	if len(fs) == 0 || fs[0].Class != verdict.Teardown || !strings.Contains(fs[0].Message, "PersistentVolumeClaim vm-md0-disk") {
		t.Fatalf("teardown failures %+v; want first a class teardown failure naming the PVC left", fs)
	}
	if !slices.Equal(fs[0].Evidence, []string{"clusters/management/events.jsonl"}) {
		t.Errorf("the leak's evidence is %q, want the file the diagnostics named", fs[0].Evidence)
	}
	if want := []string{verdict.Label(verdict.Teardown, PhaseTeardown)}; !slices.Equal(d.asked, want) {
		t.Errorf("the diagnostics were asked for %q, want %q", d.asked, want)
	}
}
