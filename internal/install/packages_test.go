package install

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// What the lanes disabled before issue 9: monitoring and seaweedfs among them.
var oldDisabled = []string{
	"cozystack.linstor", "cozystack.linstor-scheduler", "cozystack.monitoring-application", "cozystack.monitoring-agents",
	"cozystack.grafana-operator", "cozystack.victoria-metrics-operator", "cozystack.goldpinger", "cozystack.seaweedfs-application", "cozystack.velero",
}

func (e *env) packageCRDs() {
	e.t.Helper()
	e.crds([]string{"helmreleases.helm.toolkit.fluxcd.io"}, "packages.cozystack.io.yaml")
}

// With the Package dependency behaviour of Cozystack's operator played by a stand-in and the
// platform chart's Packages at main 3c780acd417f, the disabled set the lanes used to have
// leaves tenant-application, cozystack-basics and kubevirt-cdi Ready=False
// DependenciesNotReady with no HelmRelease. The Package gate ends at once with a configuration
// failure naming the disabled Package and the chain, not at the phase deadline.
func TestAnOrphanedPackageIsAConfigurationFailure(t *testing.T) {
	e := newEnv(t)
	e.packageCRDs()
	e.startOperator()
	e.platformChart(graphAt(t, "main"), oldDisabled)

	start := time.Now()
	err := PackagesReady(testkit.Context(t, 30*time.Second), e.dyn, oldDisabled, GateOptions{})
	var ce *substrate.ConfigurationError
	if !errors.As(err, &ce) {
		t.Fatalf("want a configuration failure, got %T %v", err, err)
	}
	for _, want := range []string{
		"Package cozystack.vm-disk-application is Ready=False and gets no HelmRelease: cozystack.monitoring-application is disabled by the lane (platform.disabledPackages) and " +
			"cozystack.tenant-application waits on cozystack.monitoring-application, cozystack.cozystack-basics waits on cozystack.tenant-application, " +
			"cozystack.kubevirt-cdi waits on cozystack.cozystack-basics, cozystack.vm-disk-application waits on cozystack.kubevirt-cdi; orphaned as well: ",
		"cozystack.backupstrategy-controller", "cozystack.kubeovn-plunger",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("decided after %s", took)
	}
	ctx := testkit.Context(t, 10*time.Second)
	for _, name := range []string{"cozystack.tenant-application", "cozystack.cozystack-basics", "cozystack.kubevirt-cdi"} {
		p, err := e.dyn.Resource(gvrPackage).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st := packageState(p); st.Ready != "False" || st.Reason != "DependenciesNotReady" {
			t.Errorf("%s: %+v", name, st)
		}
	}
	for ns, name := range map[string]string{"cozy-tenant-application": "tenant-application", "cozy-kubevirt-cdi": "kubevirt-cdi"} {
		if _, err := e.dyn.Resource(gvrHelmRelease).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			t.Errorf("an orphaned Package got HelmRelease %s/%s", ns, name)
		}
	}

	// The component gates stop as soon as the orphan is known: here the first gate waits for an
	// operator Deployment that never comes, and the run is told why at once.
	l := testLane(t)
	l.Platform.DisabledPackages = nil
	for _, d := range oldDisabled {
		l.Platform.DisabledPackages = append(l.Platform.DisabledPackages, lane.DisabledPackage{Name: d, Reason: "test"})
	}
	start = time.Now()
	err = Components(testkit.Context(t, 40*time.Second), e.c, Options{Lane: l, GatesOnly: true})
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "component cozystack-operator (Cozystack operator): Package ") {
		t.Fatalf("the component gates: %T %v", err, err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the component gates ended after %s", took)
	}
}

// The lanes' disabled set orphans nothing: at both revisions every Package turns Ready with its
// HelmReleases, and the gate passes.
func TestTheLanesDisabledSetInstallsEveryPackage(t *testing.T) {
	for _, ref := range []string{"main", "v1.6.2"} {
		t.Run(ref, func(t *testing.T) {
			e := newEnv(t)
			e.packageCRDs()
			e.startOperator()
			l := testLane(t)
			g := graphAt(t, ref)
			e.platformChart(g, l.Platform.DisabledNames())
			if err := PackagesReady(testkit.Context(t, 60*time.Second), e.dyn, l.Platform.DisabledNames(), GateOptions{}); err != nil {
				t.Fatal(err)
			}
			hrs, err := e.dyn.Resource(gvrHelmRelease).List(testkit.Context(t, 10*time.Second), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := len(g.Packages) - len(l.Platform.DisabledPackages); len(hrs.Items) != want {
				t.Fatalf("%d HelmReleases, want one per Package, %d", len(hrs.Items), want)
			}
		})
	}
}
