package node_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The real Node carries the kubernetes Service to its Pods, as a kubeadm node's kube-proxy
// does: a Pod with its service account token dials KUBERNETES_SERVICE_HOST (the Service's
// ClusterIP, which no interface of this host has) and the real kube-proxy's rules take it to the
// apiserver's advertised address, which authenticates it as the Pod's service account. The
// kubelet's root is /var/lib/kubelet while the node runs, and Stop leaves neither that folder
// nor kube-proxy's chains behind.
func TestRealNodeCarriesTheKubernetesServiceToAPod(t *testing.T) {
	tools := nodeHost(t)
	addr, err := node.HostAddress()
	if err != nil {
		t.Fatal(err)
	}
	api := cptest.APIServer(t, controlplane.APIServerOptions{AdvertiseAddress: addr})
	ctx, cancel := context.WithTimeout(context.Background(), simtest.HostSlotWait+5*time.Minute)
	defer cancel()
	c := kubernetes.NewForConfigOrDie(api.Admin())

	reg := registry(ctx, t, tools, testkit.LogWriter(t))
	const ref = "docker.io/library/incluster:test"
	if _, err := reg.Push(ctx, ref, programImage(t, "incluster")); err != nil {
		t.Fatal(err)
	}
	// registered before startNode, so it runs after the node's Stop
	t.Cleanup(func() {
		if _, err := os.Stat(node.KubeletRoot); err == nil {
			t.Errorf("after Stop: %s is still there", node.KubeletRoot)
		}
		if out, _ := iptablesSave(); strings.Contains(out, "KUBE-SERVICES") {
			t.Errorf("after Stop: kube-proxy's chains are still there:\n%s", out)
		}
	})
	n := startNode(ctx, t, tools, api, reg)
	if _, err := os.Stat(filepath.Join(node.KubeletRoot, "pods")); err != nil {
		t.Errorf("the kubelet's pods folder: %v", err)
	}
	kubeProxyStart := time.Now()
	testkit.Eventually(ctx, t, "kube-proxy's rule for the kubernetes Service", testkit.Left(ctx), testkit.Err(func() error {
		out, err := exec.Command("iptables-save", "-t", "nat").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "-d 10.96.0.1/32") {
			return fmt.Errorf("iptables-save -t nat: %v\n%s", err, out)
		}
		return nil
	}))
	t.Logf("kube-proxy's rules in place %s after the node was Ready", time.Since(kubeProxyStart).Round(100*time.Millisecond))

	// What kube-controller-manager would make in the namespace: its default ServiceAccount and
	// the root CA ConfigMap every service account token volume projects.
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	root := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(api.CA.CertPEM)}}
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, root, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "incluster", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: n.Name, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: new(int64),
			Tolerations: []corev1.Toleration{{Key: node.Taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers:  []corev1.Container{{Name: "incluster", Image: ref, ImagePullPolicy: corev1.PullIfNotPresent}},
		},
	}
	start := time.Now()
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var msg string
	testkit.Eventually(ctx, t, "the in-cluster client's Pod ended", testkit.Left(ctx), testkit.Err(func() error {
		p, err := c.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s, containers %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Terminated != nil {
			msg = cs[0].State.Terminated.Message
		}
		if p.Status.Phase == corev1.PodFailed {
			nat, _ := exec.Command("iptables-save", "-t", "nat").CombinedOutput()
			t.Fatalf("the in-cluster client failed: %q\nthe host's nat table:\n%s", msg, nat)
		}
		return nil
	}))
	t.Logf("in-cluster client from create to Succeeded: %s: %s", time.Since(start).Round(100*time.Millisecond), msg)
	if want := "authenticated as system:serviceaccount:default:default through 10.96.0.1:443"; msg != want {
		t.Errorf("the in-cluster client said %q, want %q", msg, want)
	}
}

func iptablesSave() (string, error) {
	out, err := exec.Command("iptables-save").CombinedOutput()
	return string(out), err
}
