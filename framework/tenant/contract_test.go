package tenant_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/platform"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The sim keeps its own copy of the upstream names its stand-ins imitate (internal/sim/names),
// so that no stand-in learns a name from the harness it is judged by. The two copies are read
// from the same upstream sources and must agree: a name one side changes and the other does not
// would make the sim and the harness agree with each other and not with upstream.
func TestTheSimsNamesAreTheHarnesss(t *testing.T) {
	for _, c := range []struct{ what, sim, harness string }{
		{"KubevirtMachine kind", names.KubevirtMachineGVK.String(), tenant.KubevirtMachineGVK.String()},
		{"KubevirtCluster kind", names.KubevirtClusterGVK.String(), tenant.KubevirtClusterGVK.String()},
		{"Cluster API kubeconfig key", names.KubeconfigKey, tenant.KubeconfigKey},
		{"kubelet-config namespace", names.KubeletConfigNamespace, tenant.KubeletConfigNamespace},
		{"kubelet-config name", names.KubeletConfigName, tenant.KubeletConfigName},
		{"kubelet-config key", names.KubeletConfigKey, tenant.KubeletConfigKey},
		{"CoreDNS namespace", names.CoreDNSNamespace, tenant.CoreDNSNamespace},
		{"CoreDNS Service", names.CoreDNSService, tenant.CoreDNSService},
		{"launcher label", names.LabelCreatedBy, tenant.LabelCreatedBy},
		{"importer prefix", names.ImporterPrefix, tenant.ImporterPrefix},
		{"providerID prefix", names.ProviderIDPrefix, tenant.ProviderIDPrefix},
		{"disk suffix", names.DiskSuffix, tenant.DiskSuffix},
		{"providerID of a VMI", names.ProviderID("vm-1"), tenant.ProviderID("vm-1")},
		{"DataVolume of a VM", names.DataVolume("vm-1"), tenant.DataVolume("vm-1")},
		{"importer of a claim", names.ImporterPod("c-1"), tenant.ImporterPod("c-1")},
		{"Talos class", names.OSTalos, tenant.ClassTalos},
		{"Kairos class", names.OSKairos, tenant.ClassKairos},
		{"Talos family", names.OSTalos, osfamily.Talos},
		{"Kairos family", names.OSKairos, osfamily.Kairos},
	} {
		if c.sim != c.harness {
			t.Errorf("%s: the sim says %q, the harness %q", c.what, c.sim, c.harness)
		}
	}
	for _, os := range []string{osfamily.Talos, osfamily.Kairos} {
		f, err := osfamily.Lookup(os)
		if err != nil {
			t.Fatal(err)
		}
		if os == osfamily.Kairos && f.BootstrapConfig != names.KairosConfigGVK {
			t.Errorf("Kairos bootstrap config: the sim says %s, the harness %s", names.KairosConfigGVK, f.BootstrapConfig)
		}
		if os == osfamily.Talos && f.BootstrapConfig != names.TalosConfigGVK {
			t.Errorf("Talos bootstrap config: the sim says %s, the harness %s", names.TalosConfigGVK, f.BootstrapConfig)
		}
	}
}

// What the sim renders for a pool, as its model of the chart, carries the names the harness
// derives for it: the MachineDeployment, MachineHealthCheck and bootstrap template R-<pool>, a
// KubevirtMachineTemplate the harness knows as the pool's, whose disk template CAPK prefixes to
// the DataVolume the harness waits for, and the pool's Cluster API labels.
func TestTheSimsRenderCarriesTheHarnesssNames(t *testing.T) {
	app := platform.App{Namespace: "tenant-test", Name: "t1", Spec: map[string]any{"version": "v1.35", "nodeGroups": map[string]any{
		"md0": map[string]any{"minReplicas": int64(1), "maxReplicas": int64(2), "nodeGroupClassName": osfamily.Kairos}}}}
	out, err := platform.Render(app, func(string) (platform.Class, bool) { return platform.Class{}, false }, platform.Live{ControlPlaneUp: true},
		platform.Options{Versions: map[string]string{"v1.35": "v1.35.4"}, Health: platform.ChartHealthTimers()})
	if err != nil {
		t.Fatal(err)
	}
	pn := tenant.For(app.Namespace, app.Name).Pool("md0")
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range append(out.Objects, out.Bootstrap...) {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	one := func(kind string) *unstructured.Unstructured {
		if len(byKind[kind]) != 1 {
			t.Fatalf("the render has %d %s, want one", len(byKind[kind]), kind)
		}
		return byKind[kind][0]
	}
	if got := one("MachineDeployment").GetName(); got != pn.MachineDeployment() {
		t.Errorf("MachineDeployment %s, the harness waits for %s", got, pn.MachineDeployment())
	}
	if got := one("MachineHealthCheck").GetName(); got != pn.MachineHealthCheck() {
		t.Errorf("MachineHealthCheck %s, the harness reads %s", got, pn.MachineHealthCheck())
	}
	if got := one("KairosConfigTemplate").GetName(); got != pn.BootstrapTemplate() {
		t.Errorf("KairosConfigTemplate %s, the harness waits for %s", got, pn.BootstrapTemplate())
	}
	kmt := one("KubevirtMachineTemplate")
	if !pn.IsMachineTemplate(kmt.GetName()) {
		t.Errorf("KubevirtMachineTemplate %s is not the pool's by the harness's names", kmt.GetName())
	}
	dvts, _, _ := unstructured.NestedSlice(kmt.Object, "spec", "template", "spec", "virtualMachineTemplate", "spec", "dataVolumeTemplates")
	if len(dvts) != 1 {
		t.Fatalf("%d dataVolumeTemplates", len(dvts))
	}
	disk, _, _ := unstructured.NestedString(dvts[0].(map[string]any), "metadata", "name")
	// CAPK names each DataVolume <vm>-<template name> (pkg/kubevirt/utils.go:39-68).
	if vm := pn.MachineDeployment() + "-abcde-fghij"; vm+"-"+disk != tenant.DataVolume(vm) {
		t.Errorf("the disk template %q makes DataVolume %s, the harness waits for %s", disk, vm+"-"+disk, tenant.DataVolume(vm))
	}
	labels, _, _ := unstructured.NestedStringMap(kmt.Object, "spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "metadata", "labels")
	if labels[tenant.LabelDeploymentName] != pn.MachineDeployment() {
		t.Errorf("the VMI template's labels %v lack %s=%s, which the diagnostics attribute a VMI by", labels, tenant.LabelDeploymentName, pn.MachineDeployment())
	}
}

// The pinned Cozystack chart (the real lanes' and the sim's Talos-only apps') names the pool's
// objects as the harness derives them: the MachineDeployment and MachineHealthCheck
// <release>-<group>, the disk template disk-system, the deployment label on the VMI template.
func TestThePinnedChartNamesAsTheHarness(t *testing.T) {
	b, err := realupstream.Find(cptest.Tools(t))
	if err != nil {
		testkit.Unavailable(t, err)
	}
	data, err := os.ReadFile(filepath.Join(b.ChartDir(), "templates", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := string(data)
	pn := tenant.For("ns", "t1").Pool("grp")
	for _, c := range []struct{ what, template, harness string }{
		{"MachineDeployment", "kind: MachineDeployment\nmetadata:\n  name: {{ $.Release.Name }}-{{ $groupName }}\n", pn.Release() + "-" + pn.Pool},
		{"MachineHealthCheck", "kind: MachineHealthCheck\nmetadata:\n  name: {{ $.Release.Name }}-{{ $groupName }}\n", pn.Release() + "-" + pn.Pool},
		{"disk template", "          name: disk-system\n", strings.TrimPrefix(tenant.DiskSuffix, "-")},
		{"deployment label", "cluster.x-k8s.io/deployment-name: {{ $.Release.Name }}-{{ .groupName }}", tenant.LabelDeploymentName},
	} {
		if !strings.Contains(tmpl, c.template) {
			t.Errorf("the chart's templates/cluster.yaml no longer holds %q (%s)", c.template, c.what)
		}
	}
	if pn.MachineDeployment() != pn.Release()+"-"+pn.Pool || pn.MachineHealthCheck() != pn.MachineDeployment() || tenant.DiskSuffix != "-disk-system" ||
		tenant.LabelDeploymentName != "cluster.x-k8s.io/deployment-name" || !strings.HasPrefix(pn.Release(), tenant.ReleasePrefix) {
		t.Errorf("the harness derives %s, %s, %s, %s from the chart's names otherwise", pn.MachineDeployment(), pn.MachineHealthCheck(), tenant.DiskSuffix, tenant.LabelDeploymentName)
	}
}
