package tenant

import (
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

func TestRunNamesCarryTheRunID(t *testing.T) {
	r, err := NewRun("Ab12")
	if err != nil {
		t.Fatal(err)
	}
	if r.TenantName() != "e2eab12" || r.Namespace() != "tenant-e2eab12" {
		t.Fatalf("tenant %q namespace %q", r.TenantName(), r.Namespace())
	}
	n := r.Cluster("pools")
	if n.Namespace != "tenant-e2eab12" || n.Name != "pools-ab12" || n.Release() != "kubernetes-pools-ab12" {
		t.Fatalf("cluster %+v release %q", n, n.Release())
	}
	if a, b := r.Cluster("pools"), r.Cluster("refusals"); a.Release() == b.Release() {
		t.Fatalf("two roles share release %q", a.Release())
	}
}

func TestRunIDIsRefusedWhenItCannotBeAName(t *testing.T) {
	for _, id := range []string{"", "a-b", "a_b", "12345678901", "ü"} {
		if _, err := NewRun(id); err == nil || !strings.Contains(err.Error(), "E2E_RUN_ID") {
			t.Errorf("NewRun(%q) = %v, want an error naming E2E_RUN_ID", id, err)
		}
	}
}

// The object graph of docs/architecture.md, name by name.
func TestNamesFollowTheObjectGraph(t *testing.T) {
	n := For("tenant-test", "t1")
	p := n.Pool("md0")
	for _, tc := range []struct{ what, got, want string }{
		{"release", n.Release(), "kubernetes-t1"},
		{"helm release", n.HelmRelease(), "kubernetes-t1"},
		{"cluster", n.Cluster(), "kubernetes-t1"},
		{"control plane", n.ControlPlane(), "kubernetes-t1"},
		{"admin kubeconfig", n.AdminKubeconfig().String(), "tenant-test/kubernetes-t1-admin-kubeconfig[super-admin.conf]"},
		{"kubeconfig", n.Kubeconfig().String(), "tenant-test/kubernetes-t1-kubeconfig[value]"},
		{"machine deployment", p.MachineDeployment(), "kubernetes-t1-md0"},
		{"health check", p.MachineHealthCheck(), "kubernetes-t1-md0"},
		{"bootstrap template", p.BootstrapTemplate(), "kubernetes-t1-md0"},
		{"machine template prefix", p.MachineTemplatePrefix(), "kubernetes-t1-md0-"},
		{"data volume", DataVolume("kubernetes-t1-md0-x7k2p-abcde"), "kubernetes-t1-md0-x7k2p-abcde-disk-system"},
		{"importer", ImporterPod("vm-disk-system"), "importer-vm-disk-system"},
		{"provider id", ProviderID("vm1"), "kubevirt://vm1"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	sel := p.Selector()
	if len(sel) != 2 || sel[LabelClusterName] != "kubernetes-t1" || sel[LabelDeploymentName] != "kubernetes-t1-md0" {
		t.Errorf("selector %v", sel)
	}
}

func TestMachineTemplatesOfAnotherPoolDoNotMatch(t *testing.T) {
	p := For("ns", "t1").Pool("md0")
	for name, want := range map[string]bool{
		"kubernetes-t1-md0-a1b2c3":     true,
		"kubernetes-t1-md0-x-a1b2c3":   false, // pool "md0-x"
		"kubernetes-t1-md0-a1b2c":      false,
		"kubernetes-t1-md0-A1B2C3":     false,
		"kubernetes-t1-md01-a1b2c3":    false,
		"kubernetes-t1-md0-a1b2c3-old": false,
	} {
		if got := p.IsMachineTemplate(name); got != want {
			t.Errorf("IsMachineTemplate(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestProviderIDRoundTrip(t *testing.T) {
	if vmi, ok := VMIFromProviderID(ProviderID("vm-1")); !ok || vmi != "vm-1" {
		t.Fatalf("%q %v", vmi, ok)
	}
	for _, id := range []string{"", "kubevirt://", "aws:///eu-west-1a/i-1", "vm-1"} {
		if _, ok := VMIFromProviderID(id); ok {
			t.Errorf("VMIFromProviderID(%q) accepted", id)
		}
	}
}

func TestLauncherPodOfAVMIIsFoundByItsUIDLabel(t *testing.T) {
	if LauncherVMIUID(map[string]string{"kubevirt.io/created-by": "u-1", "kubevirt.io": "virt-launcher"}) != "u-1" {
		t.Error("launcher's VMI UID not read")
	}
	if LauncherVMIUID(map[string]string{"app": "x"}) != "" {
		t.Error("a Pod that is no launcher read as one")
	}
}

func TestPoolNamesThatCannotFitAreRefusedWithTheExcess(t *testing.T) {
	n := For("ns", "pools-ab12")
	if err := n.CheckPoolNames("md0", "kairos", "acme"); err != nil {
		t.Fatal(err)
	}
	// kubernetes-pools-ab12-<pool>-<5>-<5> is 63 characters for a 29-character pool.
	if err := n.CheckPoolNames(strings.Repeat("p", 29)); err != nil {
		t.Fatalf("a pool whose Machine names are exactly 63 characters: %v", err)
	}
	long := strings.Repeat("p", 30)
	err := n.CheckPoolNames("md0", long, "Bad_Pool")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`pool "` + long + `"`, "shorten", `"Bad_Pool" is not a DNS label`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: missing %q", err, want)
		}
	}
}

func TestClassFamilyKnowsTheBuiltInsAndRefusesAnUnknownOS(t *testing.T) {
	l := &lane.Lane{File: "lanes/x.yaml", Classes: []lane.Class{{Name: "acme", OS: "kairos"}, {Name: "odd", OS: "plan9"}}}
	if f, err := ClassFamily(l, "talos"); err != nil || f.BootstrapTemplate.Kind != "TalosConfigTemplate" {
		t.Fatalf("talos: %+v %v", f, err)
	}
	if f, err := ClassFamily(l, "acme"); err != nil || f.BootstrapConfig.Kind != "KairosConfig" || !f.Kubeadm {
		t.Fatalf("acme: %+v %v", f, err)
	}
	// An unknown OS is an error naming the known ones, never silently Talos.
	if _, err := ClassFamily(l, "odd"); err == nil || !strings.Contains(err.Error(), `"plan9" is not a worker OS this harness knows (known: kairos, talos)`) {
		t.Fatalf("odd: %v", err)
	}
	if _, err := ClassFamily(l, "nope"); err == nil || !strings.Contains(err.Error(), `class "nope" is neither a built-in`) {
		t.Fatalf("nope: %v", err)
	}
}

// The lane refuses exactly the cluster and pool names whose Machine and VM names a run with the
// longest run id could not hold: what it accepts at its limit, CheckPoolNames accepts too, and
// one character more both refuse.
func TestLaneNameLimitIsTheNamesOwn(t *testing.T) {
	r, err := NewRun(strings.Repeat("z", lane.MaxRunID))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cluster, pool string
		fits          bool
	}{
		{"pools", strings.Repeat("p", 23), true},
		{"pools", strings.Repeat("p", 24), false},
		{strings.Repeat("c", 25), "md0", true},
		{strings.Repeat("c", 26), "md0", false},
	} {
		l := &lane.Lane{Pools: []lane.Pool{{Name: tc.pool, Cluster: tc.cluster, Class: "talos", Replicas: 1}}}
		laneErr := ""
		for _, e := range l.Validate() {
			if strings.Contains(e.Error(), "Machine and VM names") {
				laneErr = e.Error()
			}
		}
		nameErr := r.Cluster(tc.cluster).CheckPoolNames(tc.pool)
		if (laneErr == "") != tc.fits || (nameErr == nil) != tc.fits {
			t.Errorf("cluster %q pool %q: lane says %q, CheckPoolNames says %v; want both to agree that it fits: %v",
				tc.cluster, tc.pool, laneErr, nameErr, tc.fits)
		}
	}
}
