package world_test

//lint:file-ignore SA1019 the test reads objects at v1beta1 as the v1beta1 providers do, through the conversion webhook.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// One management cluster serves every behaviour below; it is stopped at the end and must leave
// no process behind.
func TestManagementWorld(t *testing.T) {
	tools := cptest.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	w, err := world.Start(ctx, world.Options{Tools: tools, Dir: t.TempDir(), Log: testkit.LogWriter(t)})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("management world up in %s", time.Since(start).Round(time.Millisecond))
	c := w.Cluster

	t.Run("an oversized pod is refused with Insufficient memory, a fitting one runs", func(t *testing.T) {
		big := pod("too-big", "640Gi") // twice a DefaultNodes node
		small := pod("fits", "1Gi")
		for _, p := range []*corev1.Pod{big, small} {
			if err := c.Client.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		testkit.Eventually(ctx, t, "pod fits Running", time.Minute, func() (bool, string) {
			var p corev1.Pod
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(small), &p); err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == corev1.PodRunning, "phase " + string(p.Status.Phase)
		})
		testkit.Eventually(ctx, t, "pod too-big Unschedulable with Insufficient memory", time.Minute, func() (bool, string) {
			var p corev1.Pod
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(big), &p); err != nil {
				return false, err.Error()
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
					if !strings.Contains(cond.Message, "Insufficient memory") {
						t.Fatalf("unschedulable for another reason: %s", cond.Message)
					}
					return true, ""
				}
			}
			return false, "not unschedulable yet"
		})
	})

	t.Run("kubectl logs of a pod on a kwok node returns the file a stand-in writes, follow included", func(t *testing.T) {
		path, err := w.ContainerLog("default", "fits", "main")
		if err != nil {
			t.Fatal(err)
		}
		if err := writeCRI(path, time.Now(), "first line", "second line"); err != nil {
			t.Fatal(err)
		}
		var got string
		testkit.Eventually(ctx, t, "logs served by kwok", time.Minute, func() (bool, string) {
			b, err := c.Kube.CoreV1().Pods("default").GetLogs("fits", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
			got = string(b)
			if err != nil {
				return false, err.Error()
			}
			return strings.Contains(got, "second line"), fmt.Sprintf("logs %q", got)
		})
		if !strings.HasPrefix(got, "first line\n") {
			t.Fatalf("logs: %q", got)
		}
		fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
		defer fcancel()
		rc, err := c.Kube.CoreV1().Pods("default").GetLogs("fits", &corev1.PodLogOptions{Container: "main", Follow: true}).Stream(fctx)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		lines := bufio.NewScanner(rc)
		for i := 0; i < 2 && lines.Scan(); i++ {
		}
		if err := writeCRI(path, time.Now(), "appended while following"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() || lines.Text() != "appended while following" {
			t.Fatalf("follow did not deliver the appended line: %q (%v)", lines.Text(), lines.Err())
		}
	})

	t.Run("a v1beta1 MachineDeployment is defaulted by Cluster API's webhook and reads alike in v1beta2", func(t *testing.T) {
		installTestTemplateCRD(ctx, t, c.Client)
		md := &clusterv1beta1.MachineDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "md-conv", Namespace: "default", Annotations: map[string]string{
				clusterv1.AutoscalerMinSizeAnnotation: "3", clusterv1.AutoscalerMaxSizeAnnotation: "5",
			}},
			Spec: clusterv1beta1.MachineDeploymentSpec{
				ClusterName: "c1",
				Template: clusterv1beta1.MachineTemplateSpec{Spec: clusterv1beta1.MachineSpec{
					ClusterName: "c1",
					Bootstrap:   clusterv1beta1.Bootstrap{DataSecretName: testkit.Ptr("data")},
					InfrastructureRef: corev1.ObjectReference{
						APIVersion: "infrastructure.sim.test/v1alpha1", Kind: "TestMachineTemplate", Name: "t",
					},
				}},
			},
		}
		if err := c.Client.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		var v2 clusterv1.MachineDeployment
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(md), &v2); err != nil {
			t.Fatalf("reading the v1beta1 object as v1beta2: %v", err)
		}
		if v2.Spec.Replicas == nil || *v2.Spec.Replicas != 3 {
			t.Fatalf("spec.replicas %v; the defaulting webhook seeds it from the autoscaler min-size annotation (3)", v2.Spec.Replicas)
		}
		if v2.Spec.Template.Spec.InfrastructureRef.APIGroup != "infrastructure.sim.test" || v2.Spec.Template.Spec.InfrastructureRef.Kind != "TestMachineTemplate" {
			t.Fatalf("v1beta2 infrastructureRef %+v", v2.Spec.Template.Spec.InfrastructureRef)
		}
		var v1 clusterv1beta1.MachineDeployment
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(md), &v1); err != nil {
			t.Fatal(err)
		}
		if v1.Spec.Replicas == nil || *v1.Spec.Replicas != 3 || v1.Spec.Template.Spec.InfrastructureRef.APIVersion != "infrastructure.sim.test/v1alpha1" {
			t.Fatalf("v1beta1 read back %+v", v1.Spec)
		}
	})

	pids := w.Pids()
	if len(pids) < 5 {
		t.Fatalf("world runs %d processes, want etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok", len(pids))
	}
	w.Stop()
	w.Stop() // idempotent
	stopped = true
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("process %d still runs after Stop", pid)
		}
	}
}

func pod(name, memory string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: testkit.Ptr(false),
			Containers: []corev1.Container{{Name: "main", Image: "example.invalid/main", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)},
			}}},
		},
	}
}

var _ = unstructured.Unstructured{}

// writeCRI appends lines as the kubelet's CRI log reader expects them (simenv.WriteContainerLog
// writes the same; the world does not import the stand-ins' package).
func writeCRI(path string, at time.Time, lines ...string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := fmt.Fprintf(f, "%s stdout F %s\n", at.UTC().Format(time.RFC3339Nano), l); err != nil {
			return err
		}
	}
	return nil
}

// installTestTemplateCRD installs a provider template kind of this test's own, carrying the
// Cluster API contract label that tells conversion which apiVersion a reference has.
func installTestTemplateCRD(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "testmachinetemplates.infrastructure.sim.test", Labels: map[string]string{"cluster.x-k8s.io/v1beta1": "v1alpha1"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "infrastructure.sim.test", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "TestMachineTemplate", ListKind: "TestMachineTemplateList", Plural: "testmachinetemplates", Singular: "testmachinetemplate"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{
				OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: testkit.Ptr(true)},
			}}},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
}
